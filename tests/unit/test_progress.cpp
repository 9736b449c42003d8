// Terminal output: numbers with units, the progress bar and its plain-line form for log files.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ragtrain/metrics/progress.hpp"
#include "ragtrain/metrics/units.hpp"

using namespace ragtrain;

namespace {

// A FILE* whose contents the test can read back (open_memstream), closed at the end.
class Captured {
 public:
  Captured() : f_(open_memstream(&buf_, &len_)) {}
  ~Captured() {
    std::fclose(f_);
    std::free(buf_);
  }
  std::FILE* file() { return f_; }
  std::string text() {
    std::fflush(f_);
    return std::string(buf_, len_);
  }

 private:
  char* buf_ = nullptr;
  size_t len_ = 0;
  std::FILE* f_;
};

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(Units, SiNumbers) {
  EXPECT_EQ(si_number(0), "0");
  EXPECT_EQ(si_number(950), "950");
  EXPECT_EQ(si_number(12.5), "12.5");
  EXPECT_EQ(si_number(0.25), "0.25");
  EXPECT_EQ(si_number(1234), "1.23 k");
  EXPECT_EQ(si_number(56789), "56.8 k");
  EXPECT_EQ(si_number(999700), "1.00 M");   // rounding carries into the next prefix
  EXPECT_EQ(si_number(4.5e9), "4.50 G");
  EXPECT_EQ(si_number(-2500), "-2.50 k");
  EXPECT_EQ(with_unit(5645, "seq/s"), "5.64 k seq/s");
  EXPECT_EQ(with_unit(42, "step/s"), "42 step/s");
}

TEST(Units, DurationsAndBytes) {
  EXPECT_EQ(human_duration(0.85), "850 ms");
  EXPECT_EQ(human_duration(12.34), "12.3 s");
  EXPECT_EQ(human_duration(59.97), "1m 00s");
  EXPECT_EQ(human_duration(185), "3m 05s");
  EXPECT_EQ(human_duration(3725), "1h 02m");
  EXPECT_EQ(human_duration(2 * 86400 + 3 * 3600), "2d 03h");
  EXPECT_EQ(human_duration(-1), "?");
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(int64_t{3} << 30), "3.00 GiB");
}

TEST(Units, CsvFieldsQuoteWhatWouldSplitARow) {
  EXPECT_EQ(csv_field("walk"), "walk");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
}

TEST(Progress, ModeFollowsTerminalQuietAndVerbose) {
  EXPECT_EQ(choose_progress_mode(true, false, false), ProgressMode::Bar);
  EXPECT_EQ(choose_progress_mode(false, false, false), ProgressMode::Lines);   // a log file, as under Slurm
  EXPECT_EQ(choose_progress_mode(true, false, true), ProgressMode::Lines);
  EXPECT_EQ(choose_progress_mode(true, true, false), ProgressMode::Off);
  Captured c;
  EXPECT_EQ(progress_mode_for(c.file(), false, false), ProgressMode::Lines);   // a memory stream is no terminal
}

TEST(Progress, SummaryAndBarLine) {
  EXPECT_EQ(progress_summary(0, 100, 0, "step"), "0%");
  EXPECT_EQ(progress_summary(45, 100, 2.5, "step"), "45%  2.50 step/s  ETA 22.0 s");
  EXPECT_EQ(progress_summary(100, 100, 2.5, "step"), "100%  2.50 step/s");
  const std::string line = progress_bar_line(50, 100, 10, "step", "epoch 1/2", 60);
  EXPECT_EQ(line, "epoch 1/2 [###########...........] 50%  10 step/s  ETA 5.0 s") << line;   // 60 columns
  EXPECT_LE(progress_bar_line(50, 100, 10, "step", std::string(200, 'x'), 60).size(), 60u);
  // A long status is cut so that the bar keeps at least 10 columns.
  EXPECT_NE(progress_bar_line(50, 100, 10, "step", std::string(200, 'x'), 60).find("[#####.....]"), std::string::npos);
}

TEST(Progress, LinesModePrintsOneLinePerReportWithRateAndEta) {
  Captured c;
  double now = 0;
  {
    Progress p(c.file(), ProgressMode::Lines, 100, "step", 0, [&] { return now; });
    for (int64_t s = 1; s <= 40; ++s) {
      now = s * 0.5;   // 2 steps per second
      p.tick(s);
      if (s % 20 == 0) p.report(s, "epoch 1/1  step " + std::to_string(s) + "/100");
    }
    p.println("epoch 1 done");
  }
  EXPECT_EQ(c.text(),
            "epoch 1/1  step 20/100  [20%  2 step/s  ETA 40.0 s]\n"
            "epoch 1/1  step 40/100  [40%  2 step/s  ETA 30.0 s]\n"
            "epoch 1 done\n");
}

TEST(Progress, BarModeRedrawsInPlaceAtMostTenTimesASecond) {
  Captured c;
  double now = 0;
  {
    Progress p(c.file(), ProgressMode::Bar, 1000, "step", 0, [&] { return now; });
    for (int64_t s = 1; s <= 1000; ++s) {
      now = s * 0.001;   // one second in all: about 10 redraws
      p.tick(s);
    }
    p.println("epoch 1 done");
  }
  const std::string out = c.text();
  const size_t draws = count(out, "\x1b[K");
  EXPECT_GE(draws, 10u);
  EXPECT_LE(draws, 14u) << out;
  EXPECT_NE(out.find("\r\x1b[Kepoch 1 done\n"), std::string::npos) << "the bar is cleared before a line that stays";
  EXPECT_EQ(out.back(), '\n') << "the bar's line is ended at the end";
  EXPECT_NE(out.find("100%"), std::string::npos);
}

TEST(Progress, OffPrintsNothingAndResumedRunsCountOnlyNewWork) {
  Captured c;
  {
    Progress p(c.file(), ProgressMode::Off, 10, "step");
    p.tick(5);
    p.report(5, "x");
    p.println("y");
  }
  EXPECT_EQ(c.text(), "");
  double now = 0;
  Progress p(nullptr, ProgressMode::Off, 100, "step", 60, [&] { return now; });
  now = 10;
  p.tick(80);
  EXPECT_DOUBLE_EQ(p.rate(), 2.0);   // 20 steps in 10 s, not 80
}
