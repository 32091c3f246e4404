// The run file's layout as data, shared by its writer (run_file_write.cpp), reader
// (run_file_read.cpp) and validator (run_file_validate*.cpp): required attributes and groups,
// the fields of every table, and the small typed accessors all three use. The layout is
// documented in docs/SCHEMA.md: change both together, and bump kSchemaVersion for incompatible
// changes. Internal to the run file's sources.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "app/h5.hpp"
#include "app/run_data.hpp"
#include "app/summary.hpp"
#include "core/error.hpp"
#include "core/files.hpp"

namespace ridgeline::run_file_detail {

inline const char* const kRootAttrs[] = {
    "schema_version", "ridgeline_version", "git_sha", "created_utc", "argv", "world_size"};
inline const char* const kGroups[] = {"/stack", "/config", "/topology",
                                      "/ops",   "/ranks",  "/summary"};
// The stack fingerprint writes these on every build, with or without CUDA.
inline const char* const kStackAttrs[] = {"mpi_library", "hdf5", "build_type"};
// Files of `ridgeline collectives` (root attribute command = "collectives") hold no timelines:
// their results are tables under /collectives and the fitted roof under /roofs/interconnect.
inline const char* const kCollectivesCommand = "collectives";
inline const char* const kCollectivesGroups[] = {"/stack", "/config", "/topology", "/collectives",
                                                 "/roofs"};
inline const char* const kRoofPath = "/roofs/interconnect";
// A /collectives table whose name ends with this holds per-iteration samples.
inline const char* const kSamplesSuffix = "_samples_ns";
inline const char* const kResultIntColumns[] = {"size_bytes", "count", "wrong", "iters"};
inline const char* const kResultNumberColumns[] = {"time_mean_ns", "time_p50_ns",   "time_p95_ns",
                                                   "time_p99_ns",  "time_min_ns",   "algbw_gbps",
                                                   "busbw_gbps",   "busbw_p50_gbps"};
inline const char* const kRoofTextColumns[] = {"collective", "dtype", "transport"};
inline const char* const kRoofIntColumns[] = {"group_size", "fit_min_bytes", "fit_max_bytes"};
inline const char* const kRoofNumberColumns[] = {"alpha_us", "beta_gbps"};
// The lower envelope, added within schema version 1: collectives files written before it lack
// it; roofs, run and sweep files (which attribute with it) always have it.
inline const char* const kRoofEnvelopeColumns[] = {"floor_alpha_us", "floor_beta_gbps"};
// The other /roofs tables of roofs, run and sweep files: (table, text, integer, number fields).
struct RoofTable {
  const char* path;
  std::vector<const char*> text, ints, numbers;
};
inline const RoofTable kRoofTables[] = {
    {"/roofs/gemm",
     {"dtype", "label"},
     {"m", "n", "k", "reps"},
     {"best_ns", "p50_ns", "tflops", "sm_clock_mhz"}},
    {"/roofs/memory", {"kind"}, {"bytes", "reps"}, {"best_ns", "p50_ns", "gbps", "sm_clock_mhz"}},
    {"/roofs/launch", {"kind"}, {"launches"}, {"ns_per_launch", "sm_clock_mhz"}}};
// Sweep files: a row per point and the crossovers found.
inline const RoofTable kSweepTables[] = {
    {"/sweep/points",
     {"status", "label", "phase", "overlap", "transport", "dtype", "ceiling", "check"},
     {"point", "tp", "batch", "seq", "context", "hidden"},
     {"step_p50_ns", "step_p99_ns", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns",
      "exposed_interconnect_ns", "step_flops", "step_hbm_bytes", "step_comm_bytes"}},
    {"/sweep/crossovers",
     {"axis", "fixed", "kind", "before_value", "at_value", "note"},
     {"predicted", "before_point", "at_point"},
     {"rising_ns", "falling_ns"}}};
// Sweeps measured with repeats: each repeat, each point's intervals, each crossover's status.
inline const RoofTable kSweepRepeatTables[] = {
    {"/sweep/repeats",
     {"status", "ceiling"},
     {"point", "repeat"},
     {"step_p50_ns", "step_p99_ns", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns",
      "exposed_interconnect_ns"}},
    {"/sweep/points",
     {},
     {"repeats"},
     {"step_p50_lo_ns", "step_p50_hi_ns", "compute_lo_ns", "compute_hi_ns", "hbm_lo_ns",
      "hbm_hi_ns", "interconnect_lo_ns", "interconnect_hi_ns", "launch_lo_ns", "launch_hi_ns"}},
    {"/sweep/crossovers",
     {"status"},
     {},
     {"rising_lo_ns", "rising_hi_ns", "falling_lo_ns", "falling_hi_ns"}}};
// Top-level groups of the run layout; every other group may hold NamedTables.
inline const char* const kLayoutGroups[] = {"stack", "config",  "topology", "ops",
                                            "ranks", "summary", "points"};

// The root attribute file_layout of files whose rows sit in node files behind external links.
inline const char* const kPerNodeLayout = "per-node";

// Problems listed one by one per timeline before the rest are only counted: a corrupt
// timeline can have millions of bad rows.
inline constexpr size_t kMaxRowProblems = 10;

// /summary attributes from RunSummary::step; `count` is written apart, as an integer.
struct StepField {
  const char* name;
  double SeriesStats::*member;
};
inline constexpr StepField kStepFields[] = {
    {"mean_ns", &SeriesStats::mean}, {"min_ns", &SeriesStats::min}, {"max_ns", &SeriesStats::max},
    {"p50_ns", &SeriesStats::p50},   {"p95_ns", &SeriesStats::p95}, {"p99_ns", &SeriesStats::p99}};

// /summary/ops fields, named as the OpAggregate members; `count` is the one integer field.
struct TextField {
  const char* name;
  std::string OpAggregate::*member;
};
inline constexpr TextField kAggregateText[] = {{"name", &OpAggregate::name},
                                               {"kind", &OpAggregate::kind},
                                               {"lane", &OpAggregate::lane},
                                               {"ceiling", &OpAggregate::ceiling}};
struct NumberField {
  const char* name;
  double OpAggregate::*member;
};
inline constexpr NumberField kAggregateNumbers[] = {
    {"p50_ns", &OpAggregate::p50_ns},
    {"mean_ns", &OpAggregate::mean_ns},
    {"per_step_p50_ns", &OpAggregate::per_step_p50_ns},
    {"share", &OpAggregate::share},
    {"flops", &OpAggregate::flops},
    {"hbm_bytes", &OpAggregate::hbm_bytes},
    {"comm_bytes", &OpAggregate::comm_bytes},
    {"achieved_tflops", &OpAggregate::achieved_tflops},
    {"achieved_gbps", &OpAggregate::achieved_gbps},
    {"compute_bound_ns", &OpAggregate::compute_bound_ns},
    {"hbm_bound_ns", &OpAggregate::hbm_bound_ns},
    {"interconnect_bound_ns", &OpAggregate::interconnect_bound_ns},
    {"launch_bound_ns", &OpAggregate::launch_bound_ns},
    {"bound_ns", &OpAggregate::bound_ns},
    {"efficiency", &OpAggregate::efficiency}};
// Attribution fields, added within schema version 1: files written before them lack them.
inline bool is_attribution_field(const std::string& name) {
  for (const char* f : {"ceiling", "compute_bound_ns", "hbm_bound_ns", "interconnect_bound_ns",
                        "launch_bound_ns", "bound_ns", "efficiency"})
    if (name == f) return true;
  return false;
}

inline std::string number_text(double value) {
  return attr_to_string(AttrValue(value));
}

inline int64_t int_attr(const Attrs& attrs, const std::string& key, const std::string& where) {
  const AttrValue* value = find_attr(attrs, key);
  if (value == nullptr) throw Error(where + ": missing attribute '" + key + "'");
  const auto* number = std::get_if<int64_t>(value);
  if (number == nullptr) throw Error(where + ": attribute '" + key + "' is not an integer");
  return *number;
}

inline double number_attr(const Attrs& attrs, const std::string& key, const std::string& where) {
  const AttrValue* value = find_attr(attrs, key);
  if (value == nullptr) throw Error(where + ": missing attribute '" + key + "'");
  if (const auto* number = std::get_if<double>(value)) return *number;
  if (const auto* number = std::get_if<int64_t>(value)) return static_cast<double>(*number);
  throw Error(where + ": attribute '" + key + "' is not a number");
}

template <class T>
inline const std::vector<T>& column(const h5::Table& table, const char* name,
                                    const std::string& where) {
  const h5::Column* found = h5::find_column(table, name);
  if (found == nullptr) throw Error(where + ": missing field '" + name + "'");
  const auto* values = std::get_if<std::vector<T>>(&found->values);
  if (values == nullptr) throw Error(where + ": field '" + name + "' has an unexpected type");
  return *values;
}

inline size_t row_count(const h5::Table& table) {
  return table.empty() ? 0 : h5::column_size(table.front().values);
}

inline bool is_command(const Attrs& root, const char* name) {
  const AttrValue* command = find_attr(root, "command");
  return command != nullptr && *command == AttrValue(std::string(name));
}

inline bool is_collectives_file(const Attrs& root) {
  return is_command(root, kCollectivesCommand);
}

inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline std::string rank_path(size_t rank) {
  return "/ranks/" + std::to_string(rank) + "/timeline";
}

// How many ranks the file really holds: the length of /topology's datasets (their shape only,
// nothing read), or none where it has no /topology. A world_size attribute is held against it
// before anything is allocated per rank.
inline std::optional<size_t> ranks_held(hid_t file) {
  if (!h5::exists(file, "/topology")) return std::nullopt;
  h5::Handle group = h5::open_group(file, "/topology");
  for (const std::string& key : h5::list_children(group.id()))
    return h5::dataset_rows(group.id(), key);
  return std::nullopt;
}

// The reason `path` cannot be opened as an HDF5 file, or an empty string.
inline std::string open_problem(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return path + ": no such file";
  if (const std::string kind = not_regular(path); !kind.empty())
    return path + ": is " + kind + ", not a regular file";
  try {
    if (!h5::is_hdf5_file(path)) return path + ": not an HDF5 file";
  } catch (const Error& e) {
    return path + ": cannot read: " + e.what();
  }
  return "";
}

// An integer attribute `complete` that is 0 (a job killed before its end wrote the file).
inline bool marked_incomplete(const Attrs& attrs) {
  const AttrValue* complete = find_attr(attrs, "complete");
  return complete != nullptr && *complete == AttrValue(int64_t{0});
}

inline std::string version_problem(int64_t version) {
  return "/: schema_version " + std::to_string(version) + " is not supported (this build reads " +
         std::to_string(kSchemaVersion) + ")";
}

/// The op aggregates of a summary's ops table at `where` (/summary/ops, or a point's).
std::vector<OpAggregate> read_aggregates(hid_t file, const std::string& where);

} // namespace ridgeline::run_file_detail
