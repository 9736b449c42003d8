// What the importer fuzz targets (fuzz_ts, fuzz_npz) share: aborting on a broken invariant (libFuzzer then keeps
// the input), FUZZ_VERBOSE triage output, the invariants of imported data that write_dataset relies on, and the
// rule that a UserError names its input.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/ragged_data.hpp"

namespace fuzz {

// A broken promise of a reader: print it and abort, so libFuzzer records the input as a crash. `target` names the
// fuzz target ("fuzz_ts").
[[noreturn]] inline void fail(const char* target, const char* what) {
  std::fprintf(stderr, "%s: a reader returned data that breaks an invariant: %s\n", target, what);
  std::abort();
}

// FUZZ_VERBOSE=1 prints what became of each input (for triage: fuzz_x FILE...).
inline bool verbose() {
  static const bool on = std::getenv("FUZZ_VERBOSE") != nullptr;
  return on;
}

// Where the importers differ in what they promise: a .ts file always names its classes and has one regression
// target; a .npz file or a CSV folder may leave class names out and have several targets.
struct Promises {
  bool class_names_always = false;
  bool one_target = false;
};

// The invariants of imported data that write_dataset relies on.
inline void check_data(const char* target, const ragtrain::RaggedData& d, const Promises& p) {
  auto check = [&](bool ok, const char* what) {
    if (!ok) fail(target, what);
  };
  const int64_t n = d.num_sequences();
  check(n >= 1, "no sequence");
  check(d.num_features >= 1, "num_features < 1");
  check(d.offsets.front() == 0, "offsets[0] != 0");
  for (int64_t i = 0; i < n; ++i)
    check(d.offsets[static_cast<size_t>(i + 1)] > d.offsets[static_cast<size_t>(i)], "empty or decreasing sequence");
  check(static_cast<int64_t>(d.features.size()) == d.offsets.back() * d.num_features, "features size");
  for (float v : d.features) check(std::isfinite(v), "non-finite feature");
  if (!d.labeled) {   // a data set without labels: nothing of the labels may be left over
    check(d.num_outputs == 0 && d.labels.empty() && d.targets.empty() && d.class_names.empty(),
          "labels, targets or classes on a data set without labels");
  } else if (d.task == ragtrain::Task::Classification) {
    check(d.num_outputs >= 2, "fewer than 2 classes");
    const bool named = static_cast<int64_t>(d.class_names.size()) == d.num_outputs;
    check(named || (!p.class_names_always && d.class_names.empty()), "class names");
    check(static_cast<int64_t>(d.labels.size()) == n && d.targets.empty(), "labels size");
    for (int32_t y : d.labels) check(y >= 0 && y < d.num_outputs, "label out of range");
  } else {
    check((p.one_target ? d.num_outputs == 1 : d.num_outputs >= 1) &&
              static_cast<int64_t>(d.targets.size()) == n * d.num_outputs && d.labels.empty(),
          "targets size");
    for (float y : d.targets) check(std::isfinite(y), "non-finite target");
  }
}

// The expected outcome for bad input: a UserError whose message names the input (what, where, hint).
inline void check_message(const char* target, const ragtrain::UserError& e, const std::string& name) {
  if (std::string(e.what()).find(name) == std::string::npos) {
    std::fprintf(stderr, "message: %s\n", e.what());
    fail(target, "a UserError that does not name the input");
  }
  if (verbose()) std::fprintf(stderr, "%s: UserError: %s\n", target, e.what());
}

}  // namespace fuzz
