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
#include "app/run_file_schema_data.hpp"
#include "models/roofs.hpp"

namespace CLI {
class App;
}

namespace ridgeline {

/// The options a sweep takes lists of, in the order points are enumerated (last fastest): the
/// schema's sweep axes (the /sweep attribute `axes` names them).
inline constexpr const auto& kSweepAxes = schema::enums::sweep_axis;

/// How a point's intervals are computed (the /sweep attribute `interval`).
inline const char* const kIntervalMethod =
    "95 % percentile bootstrap of the median (2000 resamples): the step resamples repeats and "
    "their iterations, each class time its repeats";

/// `model`'s what-if link axes (--link-gbps, --link-alpha-us): numbers, in a row's `axis` beside
/// kSweepAxes. Along the bandwidth the interconnect falls, so its crossover is where it stops
/// being the step's ceiling.
inline const char* const kLinkBandwidthAxis = "link_gbps";
inline const char* const kLinkLatencyAxis = "link_alpha_us";
/// The sweep axis of an MoE model's expert-parallel degree (`sweep --ep`, `model --ep`).
inline const char* const kEpAxis = "ep";

/// One point as the /sweep/points table holds it.
struct SweepRow {
  int64_t point = 0;
  std::string status = "ok";
  std::string label;
  std::map<std::string, std::string> axis; ///< every kSweepAxes value of the point, as text
  /// Over the repeats that ran: the median of the repeats' p50 steps and its 95 % interval
  /// (repeated_median: a two-level bootstrap over repeats and their iterations).
  double step_p50_ns = 0, step_p99_ns = 0;
  double step_lo_ns = 0, step_hi_ns = 0;
  /// compute, hbm, interconnect, launch (Ceiling order): the median over repeats of the p50
  /// step's time by ceiling, and its 95 % interval (bootstrap over the repeats).
  double class_ns[4] = {0, 0, 0, 0};
  double class_lo_ns[4] = {0, 0, 0, 0}, class_hi_ns[4] = {0, 0, 0, 0};
  double exposed_interconnect_ns = 0;
  std::string ceiling = "none"; ///< the class of the largest median time
  int64_t repeats = 1;          ///< repeats that ran to the end (a failed point: 0)
  double step_flops = 0, step_hbm_bytes = 0, step_comm_bytes = 0;
  std::string check;
  double setup_s = 0, measure_s = 0;
  std::string file; ///< the file it was read from (report of several files)
};

/// One repeat of one point as the /sweep/repeats table holds it.
struct SweepRepeat {
  int64_t point = 0, repeat = 0;
  std::string status = "ok";
  double step_p50_ns = 0, step_p99_ns = 0;
  double class_ns[4] = {0, 0, 0, 0};
  double exposed_interconnect_ns = 0;
  std::string ceiling = "none";
};

/// How far a crossover is established: `found` where the two crossing times differ beyond their
/// 95 % intervals at both points; `within noise` where their ceilings changed but the intervals
/// overlap at one of them; `unrepeated` where a point was measured once (no interval);
/// `predicted` for the roofs' point estimate past the grid; `from the first point` where a line
/// of the grid is interconnect-bound from its first point on.
/// The schema's crossover statuses.
inline constexpr const auto& kCrossoverStatuses = schema::enums::crossover_status;

/// One crossover (or the prediction of one) along an axis.
struct Crossover {
  std::string axis, fixed, kind; ///< kind: interconnect | hbm | compute (the class taking over)
  bool predicted = false;
  std::string status = "found"; ///< one of kCrossoverStatuses
  std::string before_value, at_value;
  int64_t before_point = -1, at_point = -1;
  /// At the later point: the rising class's and the falling class's median time and interval.
  double rising_ns = 0, falling_ns = 0;
  double rising_lo_ns = 0, rising_hi_ns = 0, falling_lo_ns = 0, falling_hi_ns = 0;
  std::string note;
};

/// The order of a text axis's values where it is not the text order: the transport, fastest
/// link first, by each value's measured interconnect bandwidth (GB/s).
using AxisOrder = std::map<std::string, std::map<std::string, double>>;

/// Measured crossovers along each of `axes` among the ok rows (groups of rows equal in every
/// other axis, ordered by the axis value: numbers numerically, a text axis by `order` where it
/// ranks every value, else by its text), each with its status (kCrossoverStatuses). Along
/// kLinkBandwidthAxis, one row per line: the lowest bandwidth at which the ceiling is no longer
/// the interconnect (kind: the class taking over), or, marked predicted with no at_value, that
/// the line never or always is.
std::vector<Crossover> find_crossovers(const std::vector<SweepRow>& rows,
                                       const std::vector<std::string>& axes,
                                       const AxisOrder& order = {});

/// The interconnect bandwidth that ranks a file's transport among others: the all-reduce
/// roof's fitted bus bandwidth at the largest group measured within a node (GB/s); 0 without
/// one.
double interconnect_gbps(const Roofs& roofs);

/// Sets `row`'s medians, intervals, repeat count and ceiling from its ok repeats among
/// `repeats` and their per-iteration steps `step_samples` (one series per ok repeat).
void aggregate_repeats(SweepRow& row, const std::vector<SweepRepeat>& repeats,
                       const std::vector<std::vector<double>>& step_samples);

/// The /sweep/points, /sweep/repeats and /sweep/crossovers tables, and back.
Table sweep_points_table(const std::vector<SweepRow>& rows);
Table sweep_repeats_table(const std::vector<SweepRepeat>& repeats);
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
/// Whether `axis` takes integers (tp, batch, seq, context, hidden, ep); prefill_share takes shares
/// (numbers from 0 to 1).
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
/// Replaces the scalar option of every sweep axis on `cmd` (bound by bind_run_options, and
/// --prefill-share by bind_mixed_options: prefill_share's flag) with a checked comma list into
/// `lists`; an axis `cmd` binds no option for stays empty. `sweep` and `model` share it.
void bind_sweep_axis_lists(CLI::App& cmd, std::string (&lists)[std::size(kSweepAxes)]);

/// The roofs' prediction along the numeric `axis` for a line of points with no interconnect
/// crossover, from its first and last configuration: scans past them (x2 steps, up to x64) in the
/// direction in which the interconnect gains; at_value empty where none is predicted.
Crossover predict_crossover(const std::string& axis, const std::string& fixed,
                            const RunConfig& first, const RunConfig& last, const Roofs& roofs,
                            const std::string& transport);

/// Adds, for each line of ok `rows` along a numeric axis of `axes` that holds no interconnect
/// crossover among `crossovers`, the roofs' prediction (predict_crossover() from the line's
/// first and last configuration in `configs`, one per row), or that the line starts on the
/// interconnect. Nothing without roofs.
void add_predicted_crossovers(std::vector<Crossover>& crossovers, const std::vector<SweepRow>& rows,
                              const std::vector<std::string>& axes,
                              const std::vector<RunConfig>& configs, const Roofs& roofs,
                              const std::string& transport);

/// "a=1 b=2": a row's values along `axes`.
std::string sweep_row_label(const SweepRow& row, const std::vector<std::string>& axes);

/// The step's time under each roof class predicted from the work model (one step, one rank):
/// the sum of every op's bound, by its ceiling. Interconnect roofs of a group size that was not
/// measured are taken from the largest measured group (said in `note`).
void predict_classes(const RunConfig& cfg, const Roofs& roofs, const std::string& transport,
                     double (&class_ns)[4], std::string& note);

} // namespace ridgeline
