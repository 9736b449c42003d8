// The search space of `ragtrain tune` (--space FILE.ini, or the default) and the recipe each trial draws from it:
// a pure function of (space, seed, trial number), so the same seed gives the same trials on any rank count.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ragtrain {

// One searched option of `train`, by its command-line name. In a space file:
//   name = a | b | c       a choice (one value alone: the option is fixed at it for every trial)
//   name = LO .. HI        uniform in [LO, HI]; integers when both bounds are written as integers
//   name = LO .. HI log    log-uniform in [LO, HI] (LO > 0)
struct Dimension {
  enum class Kind { Choice, Uniform, LogUniform };
  std::string name;
  Kind kind = Kind::Choice;
  std::vector<std::string> choices;   // Choice
  double lo = 0, hi = 0;              // Uniform, LogUniform
  bool integer = false;               // Uniform: draw integers in [lo, hi]
};

struct SearchSpace {
  std::vector<Dimension> dims;   // in file order; the order values are drawn in
  const Dimension* find(const std::string& name) const;
};

// A trial's options of `train`, in the space's order: what the trial trains with and best.ini holds.
struct Recipe {
  std::vector<std::pair<std::string, std::string>> options;
  // The value of `name`, or `fallback` when the space does not set it.
  std::string get(const std::string& name, const std::string& fallback) const;
  // "name = value" lines (a config file train reads as is).
  std::string ini() const;
};

// normalize, pool, hidden, layers, bidirectional, dropout, lr and epochs (doc/tune.md lists the ranges).
SearchSpace default_space();

// Parses a space file's text; `where` names it in messages. UserError (with the line number) on a malformed line,
// an empty choice, LO > HI, a log range with LO <= 0, a name given twice, or a name tune sets itself (data, val,
// out, seed, device, ...: kReservedNames). Whether every name is an option of `train` is checked by the caller
// (cli/options.cpp owns the table).
SearchSpace parse_space(const std::string& text, const std::string& where);
SearchSpace read_space(const std::string& path);

// Trial `trial`'s recipe: every dimension drawn from its own counter-based stream of (seed, trial, dimension
// index), so adding trials never changes the earlier ones.
Recipe sample_recipe(const SearchSpace& space, uint64_t seed, int64_t trial);

// The seed a trial trains with (its --seed): drawn from (tune seed, trial), the same whichever group runs it.
uint64_t trial_seed(uint64_t seed, int64_t trial);

// The space in its file form (summary.json, the tune folder's record of what was searched).
std::string space_text(const SearchSpace& space);

}  // namespace ragtrain
