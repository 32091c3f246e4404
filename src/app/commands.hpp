// The command registry: each subcommand binds its options to its own struct and leaves an
// action that main() runs after parsing, with the MPI session.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "core/mpi_session.hpp"

namespace ridgeline {

struct CommandContext {
  MpiSession& mpi;
  std::vector<std::string> argv;         ///< the full command line, recorded in output files
  std::vector<std::string> config_files; ///< the --config files read: inputs no output may be
};

/// A file a command names: its path and the option (or argument) that names it, for messages.
struct NamedFile {
  std::string path;
  std::string option;
};

/// What a subcommand does once parsed; returns the process exit code.
using CommandAction = std::function<int(CommandContext&)>;
/// Adds one subcommand to `app` and sets `action` to run it when it is the one selected.
using CommandSetup = void (*)(CLI::App& app, CommandAction& action);

void setup_run_command(CLI::App& app, CommandAction& action);
void setup_env_command(CLI::App& app, CommandAction& action);
void setup_validate_command(CLI::App& app, CommandAction& action);
void setup_report_command(CLI::App& app, CommandAction& action);
void setup_collectives_command(CLI::App& app, CommandAction& action);
void setup_sweep_command(CLI::App& app, CommandAction& action);
void setup_roofs_command(CLI::App& app, CommandAction& action);
void setup_compare_command(CLI::App& app, CommandAction& action);
void setup_model_command(CLI::App& app, CommandAction& action);

/// Builds the whole CLI (every registered command) into `app`; returns the selected action.
void build_cli(CLI::App& app, CommandAction& action);
/// The one-line message for a parse error of `app`: CLI11's own, except where it would not tell
/// a person what to change (an option given twice, an unknown command).
std::string usage_message(const CLI::ParseError& error, CLI::App& app);

} // namespace ridgeline
