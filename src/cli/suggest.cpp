// "Did you mean --hidden?": edit distance over a subcommand's option names.
#include "ragtrain/cli/suggest.hpp"

#include <algorithm>

namespace ragtrain {

size_t edit_distance(const std::string& a, const std::string& b) {
  // d[i][j]: distance between the first i letters of a and the first j of b (option names are short).
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::vector<std::string> closest_names(const std::string& word, const std::vector<std::string>& candidates) {
  // One edit per three letters, at least one and at most three: "lr" -> "l" is a guess worth making, "data" ->
  // "seed" (3 edits in 4 letters) is not.
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  size_t best = limit + 1;
  std::vector<std::string> out;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d > limit || d > best) continue;
    if (d < best) out.clear();
    best = d;
    if (out.size() < 3) out.push_back(c);
  }
  return out;
}

namespace {

// PyTorch's names (nn.LSTM's arguments, DataLoader's batch_size, the optimizers' learning rate, common training
// scripts' flags) for ragtrain's options: too far apart in letters for the edit distance to find them.
const std::map<std::string, std::string>& pytorch_names() {
  static const std::map<std::string, std::string> names = {
      {"batch-size", "batch-per-rank"}, {"num-layers", "layers"},  {"hidden-size", "hidden"},
      {"learning-rate", "lr"},          {"num-epochs", "epochs"}, {"max-epochs", "epochs"},
  };
  return names;
}

// The option of `command` that `name` is another spelling of (underscores for dashes, or PyTorch's name), or "".
std::string other_spelling(const std::string& name, const std::string& command, const OptionOwners& owners) {
  std::string dashed = name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  const auto torch = pytorch_names().find(dashed);
  for (const std::string& candidate : {dashed, torch == pytorch_names().end() ? std::string() : torch->second}) {
    const auto owned = owners.find(candidate);
    if (candidate != name && owned != owners.end() && owned->second.count(command)) return candidate;
  }
  return "";
}

}  // namespace

std::string unknown_option_hint(const std::string& name, const std::string& command, const OptionOwners& owners,
                                const std::string& prefix) {
  const std::string help = "`ragtrain " + command + " --help` lists its options";
  const std::string spelled = other_spelling(name, command, owners);
  if (spelled == "batch-per-rank")
    return "did you mean " + prefix + spelled + "? (sequences per rank per step: the global batch is ranks x " +
           prefix + spelled + ") " + help;
  if (!spelled.empty()) return "did you mean " + prefix + spelled + "? " + help;
  const auto owned = owners.find(name);
  if (owned != owners.end()) {
    std::string who;
    for (const std::string& c : owned->second) who += (who.empty() ? "" : ", ") + c;
    return prefix + name + " is an option of " + who + ", not of " + command + "; " + help;
  }
  std::vector<std::string> mine;
  for (const auto& [option, commands] : owners)
    if (commands.count(command)) mine.push_back(option);
  const std::vector<std::string> near = closest_names(name, mine);
  if (near.empty()) return help;
  std::string guess;
  for (size_t i = 0; i < near.size(); ++i)
    guess += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + prefix + near[i];
  return "did you mean " + guess + "? " + help;
}

}  // namespace ragtrain
