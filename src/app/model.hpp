// `ridgeline model`: the analytic predictor (models/predictor.hpp) over a grid of
// configurations, from a measured roofs file or a hardware description, printed like `sweep`
// and written in a sweep file's layout with every point marked predicted; `--validate FILE`
// predicts every measured point of a run or sweep file and prints the error.
#pragma once

#include <string>

#include "app/config.hpp"
#include "app/run_data.hpp"
#include "models/predictor.hpp"

namespace ridgeline {

/// Reads a hardware description (models/hardware/*.toml) strictly: every error names the file
/// and line (CLI::ConfigError).
HardwareSpec read_hardware_file(const std::string& path);

/// A point's options back from its /config attributes.
RunConfig config_from_attrs(const Attrs& config);

} // namespace ridgeline
