// --config files (the model presets models/*.toml and users' own files), read strictly: a
// malformed line, an unknown table, an unknown key, a key or table given twice and a value its
// option refuses are errors that name the file and the line, never skipped.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace ridgeline {

/// The tables of a config file that `command` reads: its own ([run] for run, [collectives] for
/// collectives, ...); sweep also reads [run] (a preset), for every option its own table and the
/// command line leave unset.
std::vector<std::string> config_tables_read_by(const std::string& command);

/// Reads a config file in the TOML subset that ridgeline takes: `# comments`, `[command]`
/// tables named after a subcommand of `root`, and `key = value` lines in them where key is an
/// option of that subcommand (without its dashes) and value a "string", 'string', number, true,
/// false or a one-line [array] (given to a list option as a comma list). Every value passes the
/// option's own checks. Throws CLI::ConfigError("<path>:<line>: <problem>") at the first problem.
std::vector<CLI::ConfigItem> parse_config_file(std::istream& in, const std::string& path,
                                               CLI::App& root);
/// parse_config_file() of the file at `path` (CLI::FileError when it cannot be read).
std::vector<CLI::ConfigItem> read_config_file(const std::string& path, CLI::App& root);

/// Makes `root`'s --config (set with set_config) read files with parse_config_file(), and
/// refuse a file that holds no table the selected subcommand reads.
void use_strict_config_files(CLI::App& root);

} // namespace ridgeline
