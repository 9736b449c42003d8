// INI config files (--config FILE.ini): top-level options for every subcommand, and sections named after a
// subcommand ([train], [bench], ...) whose options apply to that subcommand only.
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "ragtrain/cli/suggest.hpp"

namespace ragtrain {

// Stores into `vm` the options of `file` that apply to `command` (whose own options are `mine`): first its
// [command] section, then the top-level lines, so that the command line (stored before) wins over the section
// and the section over the top level. Top-level options of other subcommands and the sections of other
// subcommands are skipped; an unknown name, an unknown section, or an option in the section of a subcommand that
// does not take it is a UserError with a suggestion.
void store_config_file(const std::string& file, const std::string& command,
                       const boost::program_options::options_description& mine, const OptionOwners& owners,
                       boost::program_options::variables_map& vm);

}  // namespace ragtrain
