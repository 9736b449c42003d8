// Successive halving for `ragtrain tune`: how many epochs each rung trains, and which trials go on to the next
// rung. Synchronous and pure: a rung's decisions are a function of its results alone (sorted, ties by trial
// number), never of the order in which groups finished, so a search is the same on any number of groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragtrain {

// How one training run of a trial at one rung ended.
enum class TrialStatus {
  Done,       // trained to the rung's epochs; its validation figure ranks it
  Diverged,   // a NaN/Inf loss or gradient stopped it: recorded, ranked below every finished trial
  Failed,     // stopped by another error (printed); ranked like a diverged one
};
const char* trial_status_name(TrialStatus s);   // "done" | "diverged" | "failed"
bool parse_trial_status(const std::string& text, TrialStatus& s);

// The result of one trial at one rung.
struct RungResult {
  int64_t trial = 0;
  int rung = 0;
  int64_t epochs = 0;          // the rung's epochs for this trial (--epochs it trained with)
  int64_t epochs_reached = 0;  // epochs completed (fewer when it diverged)
  double val_loss = 0, val_accuracy = 0;   // last validation (the model at the end of training)
  double seconds = 0;          // wall time of the training run, set-up included
  TrialStatus status = TrialStatus::Done;
};

// Rung sizes: with eta = 3, 27 trials run 27, 9, 3 (three rungs); fewer trials, fewer rungs. At least one rung;
// a rung is added only while it still drops a trial (n / eta >= 1) and at most kMaxRungs in all.
inline constexpr int kMaxRungs = 3;
int rung_count(int64_t trials, int eta);

// The epochs a trial whose recipe says `epochs` trains at `rung` of `rungs`: epochs / eta^(rungs - 1 - rung),
// rounded up, at least 1; the last rung trains the recipe's own epochs (what best.ini says).
int64_t rung_epochs(int64_t epochs, int rung, int rungs, int eta);

// How many of `n` trials a rung promotes: n / eta, at least 1.
int64_t promoted_count(int64_t n, int eta);

// Orders a rung's results best first: done before diverged/failed; among done ones the higher val_accuracy
// (classification) or the lower val_loss (regression), then the lower val_loss, then the lower trial number.
std::vector<RungResult> ranked(std::vector<RungResult> results, bool classification);

// The trials the next rung trains: the best promoted_count(n) of `results` that finished (status Done), in
// trial order. `n` is the rung's size (trials run or skipped), not only those with a result. `anchor` (a trial
// number, or -1 for none) is promoted too when it finished, over the count: the trial of train's defaults reaches
// the last rung, so the search never ends on a recipe that validates below them for lack of epochs.
std::vector<int64_t> promote(const std::vector<RungResult>& results, int64_t n, int eta, bool classification,
                             int64_t anchor = -1);

// How far apart two validation accuracies measured on `validated` sequences can be by chance: one standard error
// of the best one, sqrt(a (1 - a) / n), and never below one sequence (1 / n) — a figure from 54 sequences moves
// in steps of 0.019, so a trial one sequence ahead is not a better recipe.
double accuracy_noise(double accuracy, int64_t validated);

// The run a search ends with, from its last rung: among the finished runs whose figure is within `noise` of the
// best one (classification: val_accuracy >= best - noise; regression: val_loss <= best + noise), the one of
// least `cost` (cost[i] belongs to results[i]: the smaller or shorter model), then the better figure as
// ranked(), then the lower trial number. Among recipes the validation set cannot tell apart, the cheaper one
// generalises at least as well and trains faster. Throws when none finished (the caller says why).
RungResult choose_best(const std::vector<RungResult>& results, const std::vector<double>& cost, bool classification,
                       double noise);

// The figure a trial is ranked by, as a word for tables: "val_accuracy" or "val_loss".
const char* figure_name(bool classification);

}  // namespace ragtrain
