// The CLI: one table of subcommands (explicit registry), built into one CLI11 app.
#include <algorithm>
#include <string>
#include <vector>

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

// The edit distance between two words (insertions, deletions and substitutions).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string command_names() {
  std::string names;
  for (const CommandEntry& c : kCommands)
    names += (names.empty() ? "" : ", ") + std::string(c.name);
  return names;
}

} // namespace

std::string usage_message(const CLI::ParseError& error, CLI::App& app) {
  const std::string what = error.what();
  // CLI11: "<option>: At Most 1 required but received <n>" for an option given n times.
  const std::string at_most = ": At Most 1 required but received ";
  if (const size_t at = what.find(at_most); at != std::string::npos)
    return what.substr(0, at) + " given " + what.substr(at + at_most.size()) +
           " times: give it once";
  if (app.get_subcommands().empty() && dynamic_cast<const CLI::RequiredError*>(&error)) {
    const std::vector<std::string> rest = app.remaining();
    if (rest.empty() || rest.front().rfind("-", 0) == 0)
      return "a command is required (" + command_names() + ")";
    const std::string& given = rest.front();
    const CommandEntry* nearest = &kCommands[0];
    for (const CommandEntry& c : kCommands)
      if (edit_distance(given, c.name) < edit_distance(given, nearest->name)) nearest = &c;
    return "unknown command '" + given + "': did you mean '" + nearest->name +
           "'? (commands: " + command_names() + ")";
  }
  return what;
}

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
  app.set_config("--config", "", "Preset or options file (TOML), e.g. models/llama3-70b.toml")
      ->check(regular_file());
  app.fallthrough();
  for (const CommandEntry& c : kCommands)
    c.setup(app, action);
  use_strict_config_files(app);
  // An empty value never stands for an option's default.
  refuse_empty_values(app);
}

} // namespace ridgeline
