// Numbers for people: SI prefixes (1.23 k), durations (3m 05s), rates (1.2 k seq/s) and byte sizes (1.5 MiB).
#pragma once

#include <cstdint>
#include <string>

namespace ragtrain {

// Three significant digits with an SI prefix: 950 -> "950", 1234 -> "1.23 k", 4.5e6 -> "4.50 M", 0.25 -> "0.25".
std::string si_number(double v);

// si_number and a unit: ("1.23 k", "seq/s") -> "1.23 k seq/s"; "950 seq/s" without a prefix.
std::string with_unit(double v, const std::string& unit);

// A duration: "850 ms", "12.3 s", "3m 05s", "1h 02m", "2d 03h"; "?" when negative or not finite.
std::string human_duration(double seconds);

// A count and its noun, singular for one: (1, "rank") -> "1 rank", (4, "rank") -> "4 ranks", (0, "step") -> "0 steps".
std::string count_of(int64_t n, const std::string& noun);

// A byte count in binary units: "512 B", "1.50 KiB", "2.00 GiB".
std::string human_bytes(int64_t bytes);

// One CSV field (RFC 4180): as is, or in double quotes with quotes doubled when it holds a comma, a quote or a
// line break (class names and run paths are the user's text).
std::string csv_field(const std::string& s);

}  // namespace ragtrain
