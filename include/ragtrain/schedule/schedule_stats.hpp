// What a schedule does to SGD and to the hardware, measured from the schedule alone: which global batches
// repeat between epochs, how much of a rank's padded K-sequence call is padding, and the length imbalance.
#pragma once

#include <cstdint>
#include <vector>

#include "ragtrain/schedule/schedule.hpp"

namespace ragtrain {

// The share of epoch e's global batches that epoch e-1 also trained, as sets of sequences (their order and the
// step they fall on do not matter). Only batches of >= 2 sequences count: with one sequence a batch is just
// that sequence. NaN (reported as null) where undefined: e < 1, G < 2, or no batch of >= 2 sequences.
double batch_repeat_fraction(const Schedule& schedule, int64_t epoch);
// The same from the two epochs' orders (e - 1's, then e's), when the caller holds them.
double batch_repeat_fraction(const Schedule& schedule, const Schedule::Epoch& before, const Schedule::Epoch& now);

// Padding of one step: a rank's k >= 1 sequences run as one call padded to its longest (k * max timesteps);
// returns {padded timesteps, real timesteps} summed over the ranks.
struct Padding {
  double padded = 0, real = 0;
  double fraction() const { return padded > 0 ? 1.0 - real / padded : 0.0; }
};
Padding step_padding(const Schedule::Epoch& epoch, int64_t step, const Schedule& schedule,
                     const std::vector<int64_t>& lengths);

// Means over epochs 0 .. epochs-1: step imbalance (as mean_imbalance), padding (all padded timesteps over all
// steps, so long steps weigh more, as they do in time) and the batch repeat fraction of epochs 1 .. epochs-1
// (NaN with fewer than two epochs).
struct ScheduleStats {
  double imbalance = 0, padding = 0, repeat = 0;
};
ScheduleStats measure_schedule(const Schedule& schedule, const std::vector<int64_t>& lengths, int64_t epochs);

// The per-step imbalance (as mean_imbalance) of one sequence per rank (K = 1, G = world_size) when the sorted
// lengths are dealt in consecutive blocks of G, never mixed between epochs. Sorted blocks minimise the sum of the
// step maxima, i.e. the epoch's time and idle time, so this is the reference what the balanced schedule pays for
// its mixing is measured against. Heavy tails with few steps sit near or above 2% here whatever the order: the G
// longest sequences share one step.
double sorted_deal_imbalance(std::vector<int64_t> lengths, int64_t world_size);

// How many distinct classes a global batch holds, on average over epochs 0 .. epochs-1 (batches of >= 2
// sequences, as for repeats; NaN if none). A schedule that groups sequences of equal length also groups classes
// wherever length goes with class (a speaker's or a gesture's duration): its steps then see fewer classes than
// random ones, and SGD follows one class at a time. `labels` holds every sequence's class id.
double classes_per_batch(const Schedule& schedule, const std::vector<int32_t>& labels, int64_t epochs);

}  // namespace ragtrain
