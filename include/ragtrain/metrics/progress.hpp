// Progress of a long loop on rank 0: a redrawn bar with rate and ETA on a terminal, plain lines in a log file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace ragtrain {

// Bar: one line redrawn in place (a terminal). Lines: one plain line per report(), nothing in between (a log
// file, as under Slurm, or --verbose). Off: nothing (--quiet, and every rank but 0).
enum class ProgressMode { Off, Lines, Bar };

// The bar only where a person watches: stdout is a terminal and neither --quiet nor --verbose was given.
ProgressMode choose_progress_mode(bool is_terminal, bool quiet, bool verbose);
// The same for a stream: a terminal when isatty(fileno(out)) and, under mpirun (which gives every rank a
// pseudo-terminal of its own), when mpirun's own stdout is a terminal.
ProgressMode progress_mode_for(std::FILE* out, bool quiet, bool verbose);

// "45%  12.3 step/s  ETA 3m 05s": done of total at `rate` units per second (rate <= 0: no ETA yet).
std::string progress_summary(int64_t done, int64_t total, double rate, const std::string& unit);

// One bar line of at most `width` columns: "STATUS [#####.....] 45%  12.3 step/s  ETA 3m 05s". The status
// is cut when the line would not fit; the bar takes what is left (none below 10 columns).
std::string progress_bar_line(int64_t done, int64_t total, double rate, const std::string& unit,
                              const std::string& status, int width);

class Progress {
 public:
  using Clock = std::function<double()>;   // seconds, monotonic; tests pass their own

  // `total` units of work (e.g. the run's steps). `first_done` is where the count starts (a resumed run), so
  // that the rate counts only the work done by this process.
  Progress(std::FILE* out, ProgressMode mode, int64_t total, std::string unit = "step", int64_t first_done = 0,
           Clock clock = {});
  ~Progress();   // ends the bar's line, so that what is printed next starts on a fresh one
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Every unit of work: cheap. Redraws the bar at most 10 times a second; prints nothing in Lines mode.
  void tick(int64_t done);
  // At a log interval: the new status (e.g. "epoch 2/10  step 40/100  loss 0.6931  lr 1.00e-03  950 seq/s").
  // Lines mode prints it with the summary appended; Bar mode shows it in the bar.
  void report(int64_t done, const std::string& status);
  // A line that stays (an epoch summary): printed above the bar, which is redrawn below it.
  void println(const std::string& line);
  // Draws the final state and ends the bar's line. Idempotent.
  void finish();

  ProgressMode mode() const { return mode_; }
  double rate() const;   // units per second since construction (0 before the first unit)

 private:
  void draw();
  void clear_bar();
  int terminal_width() const;

  std::FILE* out_;
  ProgressMode mode_;
  int64_t total_, first_done_, done_;
  std::string unit_, status_;
  Clock clock_;
  double start_ = 0, last_draw_ = -1;
  bool bar_visible_ = false, finished_ = false;
};

}  // namespace ragtrain
