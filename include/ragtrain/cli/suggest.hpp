// "Did you mean --hidden?": the closest option names to a mistyped one, and the hint an unknown option gets.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ragtrain {

// Option name (without dashes) -> the subcommands that accept it: the option table's second column.
using OptionOwners = std::map<std::string, std::set<std::string>>;

// Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of two neighbours cost 1
// each, so "hiddne" is 1 away from "hidden" (a swap is the commonest typo).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidates nearest to `word` (all of them at the smallest distance, at most 3), if that distance is small
// for the word's length (about one edit per three letters); empty when nothing is close.
std::vector<std::string> closest_names(const std::string& word, const std::vector<std::string>& candidates);

// The hint for an unknown option `name` of `ragtrain command`: the subcommands it belongs to when another one
// takes it, else "did you mean PREFIXx?" over the command's own options, else where the options are listed.
// PyTorch's names (--batch-size, --num-layers, --hidden-size, --learning-rate) and underscores for dashes get
// ragtrain's name. `prefix` is "--" on the command line, "" in a config file.
std::string unknown_option_hint(const std::string& name, const std::string& command, const OptionOwners& owners,
                                const std::string& prefix);

}  // namespace ragtrain
