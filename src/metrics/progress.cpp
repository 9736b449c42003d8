// Progress: the terminal bar (carriage return + erase line, throttled) and the plain-line form for log files.
#include "ragtrain/metrics/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "ragtrain/metrics/units.hpp"

namespace ragtrain {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Redraw at most this often: a terminal updated every step would cost more than a small model's step.
constexpr double kRedrawSeconds = 0.1;

// Whether `out` reaches a person's terminal. Open MPI's mpirun gives its ranks a pseudo-terminal for stdout
// whatever mpirun's own stdout is (a log file included), so isatty() alone would draw bars into log files. Under
// Open MPI the answer is therefore the launcher's: on the launching node a rank is mpirun's child, and
// /proc/PARENT/fd/1 says where mpirun writes. A rank whose parent is something else (an orted on another node,
// slurmstepd) sees no terminal there and prints plain lines, which is the safe side.
bool reaches_terminal(std::FILE* out) {
  if (::isatty(::fileno(out)) != 1) return false;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return true;
  const std::string link = "/proc/" + std::to_string(::getppid()) + "/fd/1";
  char target[256] = {};
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  const std::string where(target, static_cast<size_t>(n));
  return where.rfind("/dev/pts/", 0) == 0 || where.rfind("/dev/tty", 0) == 0;
}

}  // namespace

ProgressMode choose_progress_mode(bool is_terminal, bool quiet, bool verbose) {
  if (quiet) return ProgressMode::Off;
  // --verbose keeps every report as a line: a redrawn bar would overwrite the history it asks for.
  return is_terminal && !verbose ? ProgressMode::Bar : ProgressMode::Lines;
}

ProgressMode progress_mode_for(std::FILE* out, bool quiet, bool verbose) {
  return choose_progress_mode(reaches_terminal(out), quiet, verbose);
}

std::string progress_summary(int64_t done, int64_t total, double rate, const std::string& unit) {
  const double frac = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
  std::string s = std::to_string(static_cast<int>(frac * 100)) + "%";
  if (rate > 0) {
    s += "  " + with_unit(rate, unit + "/s");
    if (done < total) s += "  ETA " + human_duration(static_cast<double>(total - done) / rate);
  }
  return s;
}

std::string progress_bar_line(int64_t done, int64_t total, double rate, const std::string& unit,
                              const std::string& status, int width) {
  const std::string tail = " " + progress_summary(done, total, rate, unit);
  int room = width - static_cast<int>(tail.size());
  std::string head = status;
  // The bar gets what the status leaves, and at least 10 columns when the line has them: cut the status.
  const int min_bar = 12;   // "[" + 10 + "]"
  if (static_cast<int>(head.size()) + 1 + min_bar > room)
    head = head.substr(0, static_cast<size_t>(std::max(0, room - 1 - min_bar)));
  const int bar = room - static_cast<int>(head.size()) - (head.empty() ? 0 : 1) - 2;
  std::string line = head + (head.empty() ? "" : " ");
  if (bar >= 10) {
    const double frac = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 1.0;
    const int filled = static_cast<int>(frac * bar);
    line += "[" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(bar - filled), '.') + "]";
  }
  line += tail;
  if (static_cast<int>(line.size()) > width) line.resize(static_cast<size_t>(std::max(0, width)));
  return line;
}

Progress::Progress(std::FILE* out, ProgressMode mode, int64_t total, std::string unit, int64_t first_done, Clock clock)
    : out_(out),
      mode_(mode),
      total_(total),
      first_done_(first_done),
      done_(first_done),
      unit_(std::move(unit)),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  start_ = clock_();
}

Progress::~Progress() { finish(); }

double Progress::rate() const {
  const double secs = clock_() - start_;
  return secs > 0 && done_ > first_done_ ? static_cast<double>(done_ - first_done_) / secs : 0.0;
}

void Progress::tick(int64_t done) {
  done_ = done;
  if (mode_ != ProgressMode::Bar || finished_) return;
  const double now = clock_();
  if (last_draw_ >= 0 && now - last_draw_ < kRedrawSeconds) return;
  draw();
}

void Progress::report(int64_t done, const std::string& status) {
  done_ = done;
  status_ = status;
  if (mode_ == ProgressMode::Lines) {
    std::fprintf(out_, "%s  [%s]\n", status.c_str(), progress_summary(done_, total_, rate(), unit_).c_str());
    std::fflush(out_);
  } else if (mode_ == ProgressMode::Bar && !finished_) {
    draw();
  }
}

void Progress::println(const std::string& line) {
  if (mode_ == ProgressMode::Off) return;
  clear_bar();
  std::fprintf(out_, "%s\n", line.c_str());
  if (mode_ == ProgressMode::Bar && !finished_) draw();
  std::fflush(out_);
}

void Progress::finish() {
  if (finished_) return;
  if (mode_ == ProgressMode::Bar) {
    draw();
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  finished_ = true;
}

void Progress::draw() {
  last_draw_ = clock_();
  // "\r" back to the first column, then the line, then "erase to end of line" for a shorter line than before.
  std::fprintf(out_, "\r%s\x1b[K", progress_bar_line(done_, total_, rate(), unit_, status_, terminal_width()).c_str());
  std::fflush(out_);
  bar_visible_ = true;
}

void Progress::clear_bar() {
  if (!bar_visible_) return;
  std::fputs("\r\x1b[K", out_);
  bar_visible_ = false;
}

int Progress::terminal_width() const {
  winsize ws{};
  if (::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col - 1;
  if (const char* c = std::getenv("COLUMNS")) {
    const int v = std::atoi(c);
    if (v >= 20) return v - 1;
  }
  return 99;   // one less than the width, so that the cursor never wraps to a new line
}

}  // namespace ragtrain
