// libFuzzer target for the .ts parser (parse_ts): any bytes must either parse into a RaggedData that keeps the
// invariants write_dataset relies on, or throw UserError. Anything else (a sanitizer report, another
// exception, a broken invariant) is a finding: the process aborts and libFuzzer saves the input.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "ragtrain/core/error.hpp"
#include "ragtrain/data/importers.hpp"

namespace {

// A broken promise of the parser: print it and abort, so libFuzzer records the input as a crash.
void fail(const char* what) {
  std::fprintf(stderr, "fuzz_ts: parse_ts returned data that breaks an invariant: %s\n", what);
  std::abort();
}

void check(const ragtrain::RaggedData& d) {
  const int64_t n = d.num_sequences();
  if (n < 1) fail("no sequence");
  if (d.num_features < 1) fail("num_features < 1");
  if (d.offsets.front() != 0) fail("offsets[0] != 0");
  for (int64_t i = 0; i < n; ++i)
    if (d.offsets[static_cast<size_t>(i + 1)] <= d.offsets[static_cast<size_t>(i)]) fail("empty or decreasing sequence");
  if (static_cast<int64_t>(d.features.size()) != d.offsets.back() * d.num_features) fail("features size");
  for (float v : d.features)
    if (!std::isfinite(v)) fail("non-finite feature");
  if (!d.labeled) {   // @classLabel false: nothing of the labels may be left over
    if (d.num_outputs != 0 || !d.labels.empty() || !d.targets.empty() || !d.class_names.empty())
      fail("labels, targets or classes on a data set without labels");
  } else if (d.task == ragtrain::Task::Classification) {
    if (d.num_outputs < 2 || static_cast<int64_t>(d.class_names.size()) != d.num_outputs) fail("classes");
    if (static_cast<int64_t>(d.labels.size()) != n || !d.targets.empty()) fail("labels size");
    for (int32_t y : d.labels)
      if (y < 0 || y >= d.num_outputs) fail("label out of range");
  } else {
    if (d.num_outputs != 1 || static_cast<int64_t>(d.targets.size()) != n || !d.labels.empty()) fail("targets size");
    for (float y : d.targets)
      if (!std::isfinite(y)) fail("non-finite target");
  }
}

// FUZZ_VERBOSE=1 prints what became of each input (for triage: fuzz_x FILE...).
bool verbose() {
  static const bool on = std::getenv("FUZZ_VERBOSE") != nullptr;
  return on;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  // The --missing mode follows from the input's size, so that the corpus meets every mode.
  constexpr ragtrain::MissingMode kModes[] = {ragtrain::MissingMode::Error, ragtrain::MissingMode::Trim,
                                              ragtrain::MissingMode::Zero, ragtrain::MissingMode::Ffill};
  // Any exception other than UserError escapes and terminates: InternalError on input is a bug of the parser.
  try {
    check(ragtrain::parse_ts(in, "fuzz.ts", kModes[size % 4]));
  } catch (const ragtrain::UserError& e) {
    // The expected outcome for bad input; a message must say what is wrong.
    // A message for bad input names the file (what, where, hint).
    if (std::string(e.what()).find("fuzz.ts") == std::string::npos) {
      std::fprintf(stderr, "message: %s\n", e.what());
      fail("a UserError that does not name the file");
    }
    if (verbose()) std::fprintf(stderr, "fuzz_ts: UserError: %s\n", e.what());
    return 0;
  }
  if (verbose()) std::fprintf(stderr, "fuzz_ts: accepted\n");
  return 0;
}
