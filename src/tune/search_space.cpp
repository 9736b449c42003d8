// Search-space files, the default space, and each trial's recipe drawn from (space, seed, trial).
#include "ragtrain/tune/search_space.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

namespace {

// Options tune sets for every trial itself: a space may not search them.
const char* const kReservedNames[] = {"data", "val", "out", "config", "seed", "device", "max-memory", "resume",
                                      "init-from", "trace", "quiet", "verbose", "print-config", "force",
                                      "write-order", "comm-timeout"};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

bool parse_number(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(v);
}

bool integer_text(const std::string& s) {
  return !s.empty() && s.find_first_not_of("+-0123456789") == std::string::npos;
}

// "%.4g" of a drawn value: short in trials.csv and best.ini, and what the trial trained with (the recipe is
// parsed from this text, so nothing is lost between the two).
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

Dimension parse_value(const std::string& name, const std::string& value, const std::string& at) {
  Dimension d;
  d.name = name;
  const std::string hint = "write `" + name + " = a | b | c`, `" + name + " = LO .. HI` or `" + name +
                           " = LO .. HI log` (doc/tune.md)";
  const auto dots = value.find("..");
  if (dots == std::string::npos) {
    d.kind = Dimension::Kind::Choice;
    std::stringstream s(value);
    std::string item;
    while (std::getline(s, item, '|')) {
      item = trim(item);
      USER_CHECK(!item.empty(), at << ": `" << name << "` has an empty choice", hint);
      d.choices.push_back(item);
    }
    USER_CHECK(!d.choices.empty(), at << ": `" << name << "` has no value", hint);
    return d;
  }
  const std::string lo = trim(value.substr(0, dots));
  std::string rest = trim(value.substr(dots + 2));
  d.kind = Dimension::Kind::Uniform;
  const auto space = rest.find_first_of(" \t");
  if (space != std::string::npos) {
    const std::string scale = trim(rest.substr(space));
    USER_CHECK(scale == "log", at << ": `" << name << "`: unknown scale '" << scale << "'", hint);
    d.kind = Dimension::Kind::LogUniform;
    rest = trim(rest.substr(0, space));
  }
  USER_CHECK(parse_number(lo, d.lo) && parse_number(rest, d.hi),
             at << ": `" << name << "`: '" << value << "' is not a range of two numbers", hint);
  USER_CHECK(d.lo <= d.hi, at << ": `" << name << "`: LO " << lo << " is above HI " << rest, hint);
  USER_CHECK(d.kind != Dimension::Kind::LogUniform || d.lo > 0,
             at << ": `" << name << "`: a log range needs LO > 0, got " << lo, hint);
  d.integer = d.kind == Dimension::Kind::Uniform && integer_text(lo) && integer_text(rest);
  return d;
}

}  // namespace

const Dimension* SearchSpace::find(const std::string& name) const {
  for (const Dimension& d : dims)
    if (d.name == name) return &d;
  return nullptr;
}

std::string Recipe::get(const std::string& name, const std::string& fallback) const {
  for (const auto& [n, v] : options)
    if (n == name) return v;
  return fallback;
}

std::string Recipe::ini() const {
  std::string s;
  for (const auto& [n, v] : options) s += n + " = " + v + "\n";
  return s;
}

SearchSpace default_space() {
  return parse_space(
      "normalize = none | feature | series\n"
      "pool = last | mean | max\n"
      "hidden = 32 | 64 | 128\n"
      "layers = 1 | 2\n"
      "bidirectional = false | true\n"
      "dropout = 0 | 0.2\n"
      "lr = 0.002 .. 0.03 log\n"
      "epochs = 20 | 40\n",
      "the default space");
}

SearchSpace parse_space(const std::string& text, const std::string& where) {
  SearchSpace space;
  std::stringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto hash = line.find_first_of("#;");
    if (hash != std::string::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const std::string at = where + ":" + std::to_string(number);
    USER_CHECK(line.front() != '[', at << ": sections are not used in a space file",
               "list the options of `train` to search at the top level, one per line (doc/tune.md)");
    const auto eq = line.find('=');
    USER_CHECK(eq != std::string::npos, at << ": '" << line << "' is not `name = values`",
               "e.g. `hidden = 32 | 64 | 128` or `lr = 0.001 .. 0.03 log`");
    const std::string name = trim(line.substr(0, eq));
    USER_CHECK(!name.empty(), at << ": a line without an option name", "e.g. `hidden = 32 | 64`");
    for (const char* reserved : kReservedNames)
      USER_CHECK(name != reserved, at << ": `" << name << "` is set by tune itself, not searched",
                 "leave it out of the space; tune's own --" << name << " (if it has one) sets it for every trial");
    USER_CHECK(space.find(name) == nullptr, at << ": `" << name << "` is given twice", "keep one line per option");
    space.dims.push_back(parse_value(name, trim(line.substr(eq + 1)), at));
  }
  USER_CHECK(!space.dims.empty(), where << " lists no option to search",
             "add lines such as `hidden = 32 | 64 | 128` (doc/tune.md)");
  return space;
}

SearchSpace read_space(const std::string& path) {
  std::ifstream in(path);
  USER_CHECK(in, "--space " << path << ": cannot open the file", "check the path");
  std::stringstream s;
  s << in.rdbuf();
  return parse_space(s.str(), "--space " + path);
}

Recipe sample_recipe(const SearchSpace& space, uint64_t seed, int64_t trial) {
  Recipe r;
  for (size_t i = 0; i < space.dims.size(); ++i) {
    const Dimension& d = space.dims[i];
    // One stream per (trial, dimension): a space that gains a dimension keeps the others' draws.
    Rng rng(seed ^ 0x74756E65ull, mix64(static_cast<uint64_t>(trial)) ^ mix64(0x100 + i));
    std::string v;
    switch (d.kind) {
      case Dimension::Kind::Choice:
        v = d.choices[static_cast<size_t>(rng.below(d.choices.size()))];
        break;
      case Dimension::Kind::Uniform:
        if (d.integer)
          v = std::to_string(static_cast<int64_t>(d.lo) +
                             static_cast<int64_t>(rng.below(static_cast<uint64_t>(d.hi - d.lo) + 1)));
        else
          v = number_text(rng.uniform(d.lo, d.hi));
        break;
      case Dimension::Kind::LogUniform:
        v = number_text(std::exp(rng.uniform(std::log(d.lo), std::log(d.hi))));
        break;
    }
    r.options.emplace_back(d.name, v);
  }
  return r;
}

uint64_t trial_seed(uint64_t seed, int64_t trial) {
  // Below 2^31: a seed any tool (PyTorch's manual_seed, a shell) takes back as typed.
  return mix64(mix64(seed) + static_cast<uint64_t>(trial)) % 2147483647ull + 1;
}

std::string space_text(const SearchSpace& space) {
  std::string s;
  for (const Dimension& d : space.dims) {
    s += d.name + " = ";
    if (d.kind == Dimension::Kind::Choice) {
      for (size_t i = 0; i < d.choices.size(); ++i) s += (i ? " | " : "") + d.choices[i];
    } else {
      s += number_text(d.lo) + " .. " + number_text(d.hi) + (d.kind == Dimension::Kind::LogUniform ? " log" : "");
    }
    s += "\n";
  }
  return s;
}

}  // namespace ragtrain
