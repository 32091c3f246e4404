// The run configuration as the tests parse it: `run`'s options bound as the binary binds them
// (presets, --config files, strict values), the embedded defaults, and two ways to read a list
// of problems. Shared by test_config (validation) and test_config_options (strict parsing).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "app/command_support.hpp"
#include "app/config.hpp"
#include "app/config_file.hpp"

namespace ridgeline::config_test {

// The preset directory of the source tree (set by CMake).
inline const std::string kModels = RIDGELINE_MODELS_DIR;

inline RunConfig parse(std::vector<std::string> args) {
  RunConfig cfg;
  CLI::App app;
  // As build_cli does: --config on the top level, reachable after the subcommand.
  app.set_config("--config");
  app.fallthrough();
  CLI::App* run = app.add_subcommand("run");
  bind_run_options(*run, cfg);
  use_strict_config_files(app);
  refuse_empty_values(app);
  args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end()); // CLI11 takes a reversed argument vector
  app.parse(args);
  return cfg;
}

inline RunConfig host_defaults(std::vector<std::string> args = {}) {
  RunConfig cfg = parse(std::move(args));
  apply_defaults(cfg, "host");
  return cfg;
}

// How many of `problems` contain `text`.
inline int mentions(const std::vector<std::string>& problems, const std::string& text) {
  int n = 0;
  for (const std::string& p : problems)
    n += p.find(text) != std::string::npos ? 1 : 0;
  return n;
}

inline std::string joined(const std::vector<std::string>& problems) {
  std::string s;
  for (const std::string& p : problems)
    s += "\n  " + p;
  return s;
}
} // namespace ridgeline::config_test
