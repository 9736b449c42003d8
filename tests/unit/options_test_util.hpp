// Helpers shared by the option tests: parse an argument list as the binary would, or get its UserError text.
#pragma once

#include <string>
#include <vector>

#include "ragtrain/cli/options.hpp"
#include "ragtrain/core/error.hpp"

namespace ragtrain::test {

inline Invocation parse(std::vector<std::string> args) {
  args.insert(args.begin(), "ragtrain");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// "what | hint: hint" of the UserError the arguments raise; empty when they parse.
inline std::string user_error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const UserError& e) {
    return std::string(e.what()) + " | hint: " + e.hint();
  }
  return "";
}

}  // namespace ragtrain::test
