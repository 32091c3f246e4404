// The CLI: one table of subcommands (explicit registry), built into one CLI11 app.
#include "app/build_info.hpp"
#include "app/command_support.hpp"
#include "app/commands.hpp"
#include "app/config_file.hpp"

namespace ridgeline {
namespace {

struct CommandEntry {
  const char* name;
  CommandSetup setup;
};

// Every subcommand, in the order `--help` lists them.
const CommandEntry kCommands[] = {
    {"run", setup_run_command},       {"sweep", setup_sweep_command},
    {"roofs", setup_roofs_command},   {"collectives", setup_collectives_command},
    {"env", setup_env_command},       {"validate", setup_validate_command},
    {"report", setup_report_command}, {"compare", setup_compare_command},
    {"model", setup_model_command},
};

} // namespace

void build_cli(CLI::App& app, CommandAction& action) {
  app.description(
      "ridgeline: transformer layers over MPI ranks (tensor and pipeline parallel), timed op by op "
      "against the machine's compute, memory and interconnect roofs. Launch with mpirun/srun; "
      "every rank runs the same command.");
  app.set_version_flag("--version",
                       std::string("ridgeline ") + build::version + " (" + build::git_sha + ")");
  app.require_subcommand(1);
  // Presets are TOML files whose [run] table holds `run` options (a [<command>] table holds
  // another command's); --config may follow the subcommand (fallthrough) and the command line
  // overrides the file. Files are read strictly (config_file.hpp).
  app.set_config("--config", "", "Preset or options file (TOML), e.g. models/llama3-70b.toml");
  app.fallthrough();
  for (const CommandEntry& c : kCommands)
    c.setup(app, action);
  use_strict_config_files(app);
  // An empty value never stands for an option's default.
  refuse_empty_values(app);
}

} // namespace ridgeline
