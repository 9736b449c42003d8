// INI config files: top-level options, [subcommand] sections, and the checks that name what is wrong in them.
#include "ragtrain/cli/config_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ragtrain/cli/options.hpp"
#include "ragtrain/core/error.hpp"

namespace po = boost::program_options;

namespace ragtrain {

namespace {

const char* const kConfigHint = "config files use the command-line names without dashes, e.g. `hidden = 64`, at the "
                                "top (every subcommand) or under [train], [bench], ... (that subcommand only)";

// The one option `o` (a line of the file, "section.name" under a section) sorted into `section` or `top`, or
// dropped when it belongs to another subcommand. Throws for what no subcommand would accept.
void sort_option(const std::string& file, const std::string& command, po::option o, const OptionOwners& owners,
                 po::parsed_options& section, po::parsed_options& top) {
  std::string where, name = o.string_key;
  const size_t dot = name.find('.');
  if (dot != std::string::npos) {
    where = name.substr(0, dot);
    name = name.substr(dot + 1);
    const std::vector<std::string>& commands = subcommands();
    if (std::find(commands.begin(), commands.end(), where) == commands.end()) {
      const std::vector<std::string> near = closest_names(where, commands);
      throw UserError("config file '" + file + "': section [" + where + "] is not a subcommand",
                      (near.empty() ? std::string() : "did you mean [" + near.front() + "]? ") +
                          "sections are named after subcommands ([train], [eval], [bench], ...)");
    }
  }
  // Options about the command line itself, which a file cannot set (a file naming another would be silently
  // skipped, its settings never read).
  for (const char* meta : {"config", "help", "print-config"})
    if (name == meta)
      throw UserError("config file '" + file + "' sets '" + name + "', which only the command line can give",
                      std::string("remove the line") +
                          (name == "config" ? "; to combine files, merge them into one (the command line wins over it)"
                                            : ""));
  const auto owned = owners.find(name);
  if (owned == owners.end())
    throw UserError("config file '" + file + "': " + (where.empty() ? "" : "[" + where + "] ") + "unknown option '" +
                        name + "'",
                    unknown_option_hint(name, where.empty() ? command : where, owners, "") + "; " + kConfigHint);
  if (!where.empty() && !owned->second.count(where))
    throw UserError("config file '" + file + "': [" + where + "] sets '" + name + "', which `ragtrain " + where +
                        "` does not take",
                    unknown_option_hint(name, where, owners, "") + "; move it to the section of one of those");
  if (!where.empty() && where != command) return;        // another subcommand's section
  if (where.empty() && !owned->second.count(command)) return;   // a top-level option of another subcommand
  o.string_key = name;
  o.unregistered = false;
  if (!o.original_tokens.empty()) o.original_tokens.front() = name;
  (where.empty() ? top : section).options.push_back(std::move(o));
}

}  // namespace

void store_config_file(const std::string& file, const std::string& command, const po::options_description& mine,
                       const OptionOwners& owners, po::variables_map& vm) {
  // A folder or a device opens like a file and reads as nothing (or forever): only a regular file is a config.
  std::error_code ec;
  if (std::filesystem::exists(file, ec) && !std::filesystem::is_regular_file(file, ec))
    throw UserError("config file '" + file + "' is not a regular file (a folder or a device)",
                    "give --config an INI file, e.g. inputs/demo.ini");
  std::ifstream in(file);
  if (!in) throw UserError("config file '" + file + "' cannot be opened", "check the path given to --config");
  try {
    // Nothing registered: every line comes back as it is written ("train.hidden" under [train]) and is sorted
    // and checked here, against the whole option table rather than one subcommand's options.
    const po::options_description none;
    const po::parsed_options lines = po::parse_config_file(in, none, /*allow_unregistered=*/true);
    po::parsed_options section(&mine), top(&mine);
    for (const po::option& o : lines.options) sort_option(file, command, o, owners, section, top);
    po::store(section, vm);   // values already in vm (the command line) win; defaults are replaced
    po::store(top, vm);       // and the section's win over the top level's
  } catch (const po::error& e) {
    throw UserError("config file '" + file + "': " + e.what(), kConfigHint);
  }
}

}  // namespace ragtrain
