// libFuzzer target for the .ts parser (parse_ts): any bytes must either parse into a RaggedData that keeps the
// invariants write_dataset relies on, or throw UserError. Anything else (a sanitizer report, another
// exception, a broken invariant) is a finding: the process aborts and libFuzzer saves the input.
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>

#include "fuzz_harness.hpp"
#include "ragtrain/core/error.hpp"
#include "ragtrain/data/importers.hpp"

namespace {

constexpr const char* kTarget = "fuzz_ts";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  // The --missing mode follows from the input's size, so that the corpus meets every mode.
  constexpr ragtrain::MissingMode kModes[] = {ragtrain::MissingMode::Error, ragtrain::MissingMode::Trim,
                                              ragtrain::MissingMode::Zero, ragtrain::MissingMode::Ffill};
  // Any exception other than UserError escapes and terminates: InternalError on input is a bug of the parser.
  try {
    // A .ts header always names its classes and declares one regression target.
    fuzz::check_data(kTarget, ragtrain::parse_ts(in, "fuzz.ts", kModes[size % 4]), fuzz::Promises{true, true});
  } catch (const ragtrain::UserError& e) {
    fuzz::check_message(kTarget, e, "fuzz.ts");
    return 0;
  }
  if (fuzz::verbose()) std::fprintf(stderr, "fuzz_ts: accepted\n");
  return 0;
}
