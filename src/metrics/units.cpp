// si_number, human_duration, count_of and human_bytes.
#include "ragtrain/metrics/units.hpp"

#include <cmath>
#include <cstdio>

namespace ragtrain {

namespace {

// Three significant digits of a value in [0, 1000): "1.23", "12.3", "123".
std::string three_digits(double v) {
  char buf[32];
  if (v < 9.995)
    std::snprintf(buf, sizeof buf, "%.2f", v);
  else if (v < 99.95)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

std::string si_number(double v) {
  if (!std::isfinite(v)) return v > 0 ? "inf" : v < 0 ? "-inf" : "nan";
  const std::string sign = v < 0 ? "-" : "";
  double a = std::fabs(v);
  if (a < 999.5) {
    char buf[32];
    if (a == std::floor(a)) std::snprintf(buf, sizeof buf, "%.0f", a);   // counts stay integers: "950", not "950.0"
    else if (a < 1) std::snprintf(buf, sizeof buf, "%.3g", a);         // "0.25", "0.00123"
    else return sign + three_digits(a);
    return sign + buf;
  }
  static const char* const kPrefix[] = {"k", "M", "G", "T", "P", "E"};
  int p = -1;
  // Rounding to three digits can carry into the next prefix (999.7 k -> 1.00 M): divide until it does not.
  while (p < 5 && a >= 999.5) {
    a /= 1000;
    ++p;
  }
  return sign + three_digits(a) + " " + kPrefix[p];
}

std::string with_unit(double v, const std::string& unit) { return si_number(v) + " " + unit; }

std::string human_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  if (s < 1) {
    std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
  } else if (s < 59.95) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else {
    const auto t = static_cast<int64_t>(std::llround(s));
    if (t < 3600)
      std::snprintf(buf, sizeof buf, "%lldm %02llds", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
    else if (t < 86400)
      std::snprintf(buf, sizeof buf, "%lldh %02lldm", static_cast<long long>(t / 3600),
                    static_cast<long long>(t % 3600 / 60));
    else
      std::snprintf(buf, sizeof buf, "%lldd %02lldh", static_cast<long long>(t / 86400),
                    static_cast<long long>(t % 86400 / 3600));
  }
  return buf;
}

std::string count_of(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string human_bytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const kUnit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (u < 5 && v >= 1023.995) {
    v /= 1024;
    ++u;
  }
  return three_digits(v) + " " + kUnit[u];
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace ragtrain
