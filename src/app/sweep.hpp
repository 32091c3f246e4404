// `ridgeline sweep`: many points in one job, and the crossover analysis shared with `report`:
// along each swept axis, the first point where the interconnect becomes the step's ceiling (and
// where HBM and compute trade places), with the roofs' prediction where the grid holds none.
#pragma once

#include <iterator>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "app/config.hpp"
#include "app/roofs.hpp"
#include "app/run_data.hpp"
#include "models/roofs.hpp"

namespace CLI {
class App;
}

namespace ridgeline {

/// The options a sweep takes lists of, in the order points are enumerated (last fastest).
inline const char* const kSweepAxes[] = {"tp",    "batch",   "seq",       "context", "hidden",
                                         "phase", "overlap", "transport", "dtype"};

/// `model`'s what-if link axes (--link-gbps, --link-alpha-us): numbers, in a row's `axis` beside
/// kSweepAxes. Along the bandwidth the interconnect falls, so its crossover is where it stops
/// being the step's ceiling.
inline const char* const kLinkBandwidthAxis = "link_gbps";
inline const char* const kLinkLatencyAxis = "link_alpha_us";

/// One point as the /sweep/points table holds it.
struct SweepRow {
  int64_t point = 0;
  std::string status = "ok";
  std::string label;
  std::map<std::string, std::string> axis; ///< every kSweepAxes value of the point, as text
  double step_p50_ns = 0, step_p99_ns = 0;
  double class_ns[4] = {0, 0, 0, 0}; ///< compute, hbm, interconnect, launch (Ceiling order)
  double exposed_interconnect_ns = 0;
  std::string ceiling = "none";
  double step_flops = 0, step_hbm_bytes = 0, step_comm_bytes = 0;
  std::string check;
  double setup_s = 0, measure_s = 0;
  std::string file; ///< the file it was read from (report of several files)
};

/// One crossover (or the prediction of one) along an axis.
struct Crossover {
  std::string axis, fixed, kind; ///< kind: interconnect | hbm | compute (the class taking over)
  bool predicted = false;
  std::string before_value, at_value;
  int64_t before_point = -1, at_point = -1;
  double rising_ns = 0, falling_ns = 0;
  std::string note;
};

/// Measured crossovers along each of `axes` among the ok rows (groups of rows equal in every
/// other axis, ordered by the axis value). Along kLinkBandwidthAxis, one row per line: the lowest
/// bandwidth at which the ceiling is no longer the interconnect (kind: the class taking over),
/// or, marked predicted with no at_value, that the line never or always is.
std::vector<Crossover> find_crossovers(const std::vector<SweepRow>& rows,
                                       const std::vector<std::string>& axes);

/// The /sweep/points and /sweep/crossovers tables, and back.
Table sweep_points_table(const std::vector<SweepRow>& rows);
Table crossovers_table(const std::vector<Crossover>& crossovers);
std::vector<SweepRow> sweep_rows_from(const Table& points);

/// The table a sweep prints: a row per point, then the crossovers.
void print_sweep(std::ostream& out, const std::vector<SweepRow>& rows,
                 const std::vector<std::string>& axes, const std::vector<Crossover>& crossovers);

/// Checks one item of a sweep axis list (`--tp 1,2,4`, `--phase prefill,decode`): returns the
/// problem ("" if none) and sets `canonical`. `sweep` and `model` share it.
std::string sweep_axis_item(const std::string& axis, const std::string& item,
                            std::string& canonical);
/// Sets axis `axis` of `cfg` to `value` (hidden keeps the MLP's ratio to it).
void set_sweep_axis(RunConfig& cfg, const std::string& axis, const std::string& value);
/// The value of axis `axis` in `cfg`, as text.
std::string sweep_axis_value(const RunConfig& cfg, const std::string& axis);
/// Whether `axis` takes integers (tp, batch, seq, context, hidden).
bool sweep_numeric_axis(const std::string& axis);
/// Splits each given axis list (checked while parsing) into its values, integers in canonical
/// form (+4 -> 4), and names in `axes` every axis with more than one value.
void split_sweep_axis_lists(const std::string (&given)[std::size(kSweepAxes)],
                            std::vector<std::string> (&lists)[std::size(kSweepAxes)],
                            std::vector<std::string>& axes);
/// Applies the [run] table of --config to every option of `cmd` that the command line and
/// `cmd`'s own table left unset, read as strictly as `run` reads it (presets are [run] tables).
void apply_run_table(CLI::App& app, CLI::App& cmd);
/// Every combination of the axis lists (empty: the axis keeps `base`'s value), the last axis
/// fastest. `sweep` and `model` share it.
std::vector<RunConfig> sweep_grid(const RunConfig& base,
                                  const std::vector<std::string> (&lists)[std::size(kSweepAxes)]);
/// Replaces the scalar option of every sweep axis on `cmd` (bound by bind_run_options) with a
/// checked comma list into `lists`. `sweep` and `model` share it.
void bind_sweep_axis_lists(CLI::App& cmd, std::string (&lists)[std::size(kSweepAxes)]);

/// The step's time under each roof class predicted from the work model (one step, one rank):
/// the sum of every op's bound, by its ceiling. Interconnect roofs of a group size that was not
/// measured are taken from the largest measured group (said in `note`).
void predict_classes(const RunConfig& cfg, const Roofs& roofs, const std::string& transport,
                     double (&class_ns)[4], std::string& note);

} // namespace ridgeline
