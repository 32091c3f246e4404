// The run file's layout, shared by its writer (run_file_write.cpp), reader (run_file_read.cpp)
// and validator (run_file_validate*.cpp): the schema's tables (generated from
// run_file_schema.json, which also generates docs/SCHEMA.md's field tables), the bindings of
// summary fields to their struct members, and the small typed accessors all three use. Bump
// kSchemaVersion (and the JSON's schema_version) for incompatible changes. Internal to the run
// file's sources.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "app/h5.hpp"
#include "app/run_data.hpp"
#include "app/run_file_schema_data.hpp"
#include "app/summary.hpp"
#include "core/error.hpp"
#include "core/files.hpp"

namespace ridgeline::run_file_detail {

namespace sf = schema::field;
namespace sa = schema::attr;

// Files of `ridgeline collectives` (root attribute command = "collectives") hold no timelines:
// their results are tables under /collectives and the fitted roof under /roofs/interconnect.
inline const char* const kCollectivesCommand = "collectives";
inline const char* const kRoofPath = schema::tables::roofs_interconnect.path;
// A /collectives table whose name ends with this holds per-iteration samples.
inline const char* const kSamplesSuffix = "_samples_ns";
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
                                               {"ceiling", &OpAggregate::ceiling},
                                               {"scope", &OpAggregate::scope}};
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
// Attribution fields, added within schema version 1: files written before them lack them (the
// optional fields of /summary/ops).
inline bool is_attribution_field(const std::string& name) {
  for (const schema::Field& field : schema::fields(schema::tables::summary_ops))
    if (name == field.name) return !schema::always(field.required);
  return false;
}

// "a, b or c": the values of one of the schema's enums, as a problem names them.
template <size_t N> std::string one_of(const char* const (&values)[N]) {
  std::string text;
  for (size_t i = 0; i < N; ++i)
    text += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + values[i];
  return text;
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
