// Writer, reader and validator of the run file. The layout is defined here and documented in
// docs/SCHEMA.md: change both together, and bump kSchemaVersion for incompatible changes.
#include "app/run_file.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "app/command_support.hpp"
#include "app/h5.hpp"
#include "app/run_file_write.hpp"
#include "app/summary.hpp"
#include "app/sweep.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "models/layer_plan.hpp"

namespace ridgeline {
namespace {

const char* const kRootAttrs[] = {"schema_version", "ridgeline_version", "git_sha", "created_utc",
                                  "argv",           "world_size"};
const char* const kGroups[] = {"/stack", "/config", "/topology", "/ops", "/ranks", "/summary"};
// The stack fingerprint writes these on every build, with or without CUDA.
const char* const kStackAttrs[] = {"mpi_library", "hdf5", "build_type"};
// Files of `ridgeline collectives` (root attribute command = "collectives") hold no timelines:
// their results are tables under /collectives and the fitted roof under /roofs/interconnect.
const char* const kCollectivesCommand = "collectives";
const char* const kCollectivesGroups[] = {"/stack", "/config", "/topology", "/collectives",
                                          "/roofs"};
const char* const kRoofPath = "/roofs/interconnect";
// A /collectives table whose name ends with this holds per-iteration samples.
const char* const kSamplesSuffix = "_samples_ns";
const char* const kResultIntColumns[] = {"size_bytes", "count", "wrong", "iters"};
const char* const kResultNumberColumns[] = {"time_mean_ns", "time_p50_ns",   "time_p95_ns",
                                            "time_p99_ns",  "time_min_ns",   "algbw_gbps",
                                            "busbw_gbps",   "busbw_p50_gbps"};
const char* const kRoofTextColumns[] = {"collective", "dtype", "transport"};
const char* const kRoofIntColumns[] = {"group_size", "fit_min_bytes", "fit_max_bytes"};
const char* const kRoofNumberColumns[] = {"alpha_us", "beta_gbps"};
// The lower envelope, added within schema version 1: collectives files written before it lack
// it; roofs, run and sweep files (which attribute with it) always have it.
const char* const kRoofEnvelopeColumns[] = {"floor_alpha_us", "floor_beta_gbps"};
// The other /roofs tables of roofs, run and sweep files: (table, text, integer, number fields).
struct RoofTable {
  const char* path;
  std::vector<const char*> text, ints, numbers;
};
const RoofTable kRoofTables[] = {
    {"/roofs/gemm",
     {"dtype", "label"},
     {"m", "n", "k", "reps"},
     {"best_ns", "p50_ns", "tflops", "sm_clock_mhz"}},
    {"/roofs/memory", {"kind"}, {"bytes", "reps"}, {"best_ns", "p50_ns", "gbps", "sm_clock_mhz"}},
    {"/roofs/launch", {"kind"}, {"launches"}, {"ns_per_launch", "sm_clock_mhz"}}};
// Sweep files: a row per point and the crossovers found.
const RoofTable kSweepTables[] = {
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
const RoofTable kSweepRepeatTables[] = {
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
const char* const kLayoutGroups[] = {"stack", "config",  "topology", "ops",
                                     "ranks", "summary", "points"};

// The root attribute file_layout of files whose rows sit in node files behind external links.
const char* const kPerNodeLayout = "per-node";

// Problems listed one by one per timeline before the rest are only counted: a corrupt
// timeline can have millions of bad rows.
constexpr size_t kMaxRowProblems = 10;

// /summary attributes from RunSummary::step; `count` is written apart, as an integer.
struct StepField {
  const char* name;
  double SeriesStats::*member;
};
constexpr StepField kStepFields[] = {
    {"mean_ns", &SeriesStats::mean}, {"min_ns", &SeriesStats::min}, {"max_ns", &SeriesStats::max},
    {"p50_ns", &SeriesStats::p50},   {"p95_ns", &SeriesStats::p95}, {"p99_ns", &SeriesStats::p99}};

// /summary/ops fields, named as the OpAggregate members; `count` is the one integer field.
struct TextField {
  const char* name;
  std::string OpAggregate::*member;
};
constexpr TextField kAggregateText[] = {{"name", &OpAggregate::name},
                                        {"kind", &OpAggregate::kind},
                                        {"lane", &OpAggregate::lane},
                                        {"ceiling", &OpAggregate::ceiling}};
struct NumberField {
  const char* name;
  double OpAggregate::*member;
};
constexpr NumberField kAggregateNumbers[] = {
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
bool is_attribution_field(const std::string& name) {
  for (const char* f : {"ceiling", "compute_bound_ns", "hbm_bound_ns", "interconnect_bound_ns",
                        "launch_bound_ns", "bound_ns", "efficiency"})
    if (name == f) return true;
  return false;
}

std::string number_text(double value) {
  return attr_to_string(AttrValue(value));
}

int64_t int_attr(const Attrs& attrs, const std::string& key, const std::string& where) {
  const AttrValue* value = find_attr(attrs, key);
  if (value == nullptr) throw Error(where + ": missing attribute '" + key + "'");
  const auto* number = std::get_if<int64_t>(value);
  if (number == nullptr) throw Error(where + ": attribute '" + key + "' is not an integer");
  return *number;
}

double number_attr(const Attrs& attrs, const std::string& key, const std::string& where) {
  const AttrValue* value = find_attr(attrs, key);
  if (value == nullptr) throw Error(where + ": missing attribute '" + key + "'");
  if (const auto* number = std::get_if<double>(value)) return *number;
  if (const auto* number = std::get_if<int64_t>(value)) return static_cast<double>(*number);
  throw Error(where + ": attribute '" + key + "' is not a number");
}

template <class T>
const std::vector<T>& column(const h5::Table& table, const char* name, const std::string& where) {
  const h5::Column* found = h5::find_column(table, name);
  if (found == nullptr) throw Error(where + ": missing field '" + name + "'");
  const auto* values = std::get_if<std::vector<T>>(&found->values);
  if (values == nullptr) throw Error(where + ": field '" + name + "' has an unexpected type");
  return *values;
}

size_t row_count(const h5::Table& table) {
  return table.empty() ? 0 : h5::column_size(table.front().values);
}

bool is_command(const Attrs& root, const char* name) {
  const AttrValue* command = find_attr(root, "command");
  return command != nullptr && *command == AttrValue(std::string(name));
}

bool is_collectives_file(const Attrs& root) {
  return is_command(root, kCollectivesCommand);
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string rank_path(size_t rank) {
  return "/ranks/" + std::to_string(rank) + "/timeline";
}

// The reason `path` cannot be opened as an HDF5 file, or an empty string.
// How many ranks the file really holds: the length of /topology's datasets (their shape only,
// nothing read), or none where it has no /topology. A world_size attribute is held against it
// before anything is allocated per rank.
std::optional<size_t> ranks_held(hid_t file) {
  if (!h5::exists(file, "/topology")) return std::nullopt;
  h5::Handle group = h5::open_group(file, "/topology");
  for (const std::string& key : h5::list_children(group.id()))
    return h5::dataset_rows(group.id(), key);
  return std::nullopt;
}

std::string open_problem(const std::string& path) {
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

// ---- writing ----

} // namespace

void check_run_data(const std::string& path, const RunData& data, size_t ranks_expected) {
  const AttrValue* version = find_attr(data.root, "schema_version");
  if (version == nullptr || *version != AttrValue(kSchemaVersion))
    throw Error(path + ": root attribute schema_version must be the integer " +
                std::to_string(kSchemaVersion));
  const bool collectives = !has_run_layout(data.root);
  const auto ranks = static_cast<int64_t>(ranks_expected);
  if (ranks == 0) throw Error(path + ": no rank timelines to write");
  const AttrValue* world_size = find_attr(data.root, "world_size");
  if (world_size == nullptr || *world_size != AttrValue(ranks))
    throw Error(path + ": root attribute world_size must equal the number of " +
                (collectives ? "topology entries (" : "timelines (") + std::to_string(ranks) + ")");
  if (collectives && data.tables.empty()) throw Error(path + ": no result tables to write");
  for (const NamedTable& table : data.tables)
    if (table.path.size() < 2 || table.path.front() != '/' || table.path.back() == '/')
      throw Error(path + ": table path '" + table.path + "' must be absolute, naming a dataset");
  if (!collectives && data.topology.size() != ranks_expected)
    throw Error(path + ": topology has " + std::to_string(data.topology.size()) + " entries for " +
                std::to_string(ranks) + " ranks");
  std::filesystem::path directory = std::filesystem::path(path).parent_path();
  if (directory.empty()) directory = ".";
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error))
    throw UsageError(path + ": directory '" + directory.string() + "' does not exist");
}

namespace {

void write_stack(hid_t file, const RunData& data) {
  h5::Handle stack = h5::create_group(file, "stack");
  h5::write_attrs(stack.id(), data.stack);
  std::vector<std::string> names;
  std::vector<std::string> values;
  for (const auto& [name, value] : data.env) {
    names.push_back(name);
    values.push_back(value);
  }
  h5::write_table(stack.id(), "env", {{"name", std::move(names)}, {"value", std::move(values)}},
                  false);
}

template <class T>
std::vector<T> gather_topology(const std::vector<Attrs>& topology, const std::string& key) {
  std::vector<T> values;
  for (size_t rank = 0; rank < topology.size(); ++rank) {
    const AttrValue* value = find_attr(topology[rank], key);
    if (value == nullptr)
      throw Error("/topology: rank " + std::to_string(rank) + " has no '" + key + "'");
    const T* typed = std::get_if<T>(value);
    if (typed == nullptr)
      throw Error("/topology: '" + key + "' has another type on rank " + std::to_string(rank) +
                  " than on rank 0");
    values.push_back(*typed);
  }
  return values;
}

// One dataset per key, one entry per rank: the keys must be the same on every rank.
void write_topology(hid_t file, const std::vector<Attrs>& topology) {
  h5::Handle group = h5::create_group(file, "topology");
  for (size_t rank = 1; rank < topology.size(); ++rank)
    if (topology[rank].size() != topology.front().size())
      throw Error("/topology: rank " + std::to_string(rank) + " has " +
                  std::to_string(topology[rank].size()) + " keys, rank 0 has " +
                  std::to_string(topology.front().size()));
  for (const auto& entry : topology.front()) {
    std::visit(
        [&](const auto& first) {
          using T = std::decay_t<decltype(first)>;
          h5::write_dataset(group.id(), entry.first, gather_topology<T>(topology, entry.first));
        },
        entry.second);
  }
}

void write_ops(hid_t file, const OpTable& ops) {
  std::vector<int64_t> ids;
  std::vector<std::string> names;
  std::vector<std::string> kinds;
  for (size_t i = 0; i < ops.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    ids.push_back(id);
    names.push_back(ops.name(id));
    kinds.push_back(op_kind_name(ops.kind(id)));
  }
  h5::write_table(file, "ops",
                  {{"id", std::move(ids)}, {"name", std::move(names)}, {"kind", std::move(kinds)}},
                  false);
}

void write_ranks(hid_t file, const std::vector<std::vector<TimelineRecord>>& timelines) {
  h5::Handle ranks = h5::create_group(file, "ranks");
  for (size_t rank = 0; rank < timelines.size(); ++rank) {
    h5::Handle group = h5::create_group(ranks.id(), std::to_string(rank));
    h5::write_timeline(group.id(), "timeline", timelines[rank]);
  }
}

void write_summary(hid_t file, const RunSummary& summary) {
  h5::Handle group = h5::create_group(file, "summary");
  h5::write_dataset(group.id(), "step_time_ns", summary.step_ns);
  h5::write_dataset(group.id(), "warmup_step_time_ns", summary.warmup_step_ns);
  h5::write_attr(group.id(), "count", static_cast<int64_t>(summary.step.count));
  for (const StepField& field : kStepFields)
    h5::write_attr(group.id(), field.name, summary.step.*field.member);
  h5::write_attr(group.id(), "warmup_to_steady", summary.warmup_to_steady);
  h5::write_attrs(group.id(), summary.attrs);
  h5::write_table(group.id(), "ops", aggregates_table(summary.ops), false);
  if (!summary.step_context.empty()) {
    h5::write_dataset(group.id(), "decode_context", summary.step_context);
    h5::write_table(group.id(), "decode_bins", decode_bins_table(decode_bins(summary)), false);
  }
}

// Tables of more rows than this are chunked and compressed (per-iteration samples can be long).
constexpr size_t kCompressRows = 4096;

// Each table at its absolute path, creating the groups on the way; its attributes on the dataset.
void write_tables(hid_t file, const std::vector<NamedTable>& tables) {
  for (const NamedTable& named : tables) {
    const size_t slash = named.path.rfind('/');
    const std::string parent = named.path.substr(0, slash);
    const std::string leaf = named.path.substr(slash + 1);
    std::string walked;
    size_t start = 1;
    while (start <= parent.size() && !parent.empty()) {
      const size_t end = std::min(parent.find('/', start), parent.size());
      walked += "/" + parent.substr(start, end - start);
      if (!h5::exists(file, walked)) h5::create_group(file, walked);
      start = end + 1;
    }
    h5::Handle group = h5::open_group(file, parent.empty() ? "/" : parent);
    h5::write_table(group.id(), leaf, named.table, row_count(named.table) > kCompressRows);
    h5::Handle dataset(H5Dopen2(group.id(), leaf.c_str(), H5P_DEFAULT), "H5Dopen2", named.path);
    h5::write_attrs(dataset.id(), named.attrs);
  }
}

} // namespace

void write_run_contents(const std::string& path, const RunData& data, const RanksPart& ranks,
                        const Attrs& extra_root) {
  h5::Handle file = h5::create_memory_file(path);
  h5::write_attrs(file.id(), data.root);
  h5::write_attrs(file.id(), extra_root);
  write_stack(file.id(), data);
  h5::write_attrs(h5::create_group(file.id(), "config").id(), data.config);
  write_topology(file.id(), data.topology);
  const bool run_layout = has_run_layout(data.root);
  if (run_layout) {
    write_ops(file.id(), data.ops);
    if (ranks.has("")) ranks.write(file.id(), "");
    write_summary(file.id(), data.summary);
  }
  write_tables(file.id(), data.tables);
  for (const auto& [group_path, attrs] : data.group_attrs) {
    if (!h5::exists(file.id(), group_path)) h5::create_group(file.id(), group_path);
    h5::write_attrs(h5::open_group(file.id(), group_path).id(), attrs);
  }
  if (!data.points.empty()) {
    // A table written above may already sit in a point's group (a prediction's ops).
    auto open_or_create = [](hid_t parent, const std::string& name) {
      return h5::exists(parent, name) ? h5::open_group(parent, name)
                                      : h5::create_group(parent, name);
    };
    h5::Handle points = open_or_create(file.id(), "points");
    for (size_t k = 0; k < data.points.size(); ++k) {
      const RunData::Point& point = data.points[k];
      const std::string prefix = "/points/" + std::to_string(k);
      h5::Handle group = open_or_create(points.id(), std::to_string(k));
      h5::write_attrs(group.id(), point.attrs);
      h5::write_attrs(h5::create_group(group.id(), "config").id(), point.config);
      if (ranks.has(prefix)) {
        write_ops(group.id(), point.ops);
        ranks.write(group.id(), prefix);
      }
      if (point.has_summary) write_summary(group.id(), point.summary);
    }
  }
  // The root's timelines are point 0's: one copy in the file, two paths to it.
  if (run_layout && !ranks.has("") && ranks.has("/points/0"))
    h5::create_hard_link(file.id(), "/points/0/ranks", "ranks");
  h5::save_memory_file(file, path);
}

namespace {

// ---- reading ----

std::vector<Attrs> read_topology(hid_t file, size_t ranks) {
  h5::Handle group = h5::open_group(file, "/topology");
  std::vector<Attrs> topology(ranks);
  for (const std::string& key : h5::list_children(group.id())) {
    const h5::ColumnValues values = h5::read_dataset(group.id(), key);
    if (h5::column_size(values) != ranks)
      throw Error("/topology/" + key + ": " + std::to_string(h5::column_size(values)) +
                  " values, world_size is " + std::to_string(ranks));
    std::visit(
        [&](const auto& typed) {
          for (size_t rank = 0; rank < ranks; ++rank)
            topology[rank].emplace_back(key, typed[rank]);
        },
        values);
  }
  return topology;
}

OpTable read_ops(hid_t file) {
  const h5::Table table = h5::read_table(file, "/ops");
  const auto& ids = column<int64_t>(table, "id", "/ops");
  const auto& names = column<std::string>(table, "name", "/ops");
  const auto& kinds = column<std::string>(table, "kind", "/ops");
  OpTable ops;
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto id = static_cast<int64_t>(i);
    if (ids[i] != id)
      throw Error("/ops: row " + std::to_string(i) + " has id " + std::to_string(ids[i]) +
                  "; ids must be 0, 1, 2, ... in row order");
    if (ops.intern(names[i], parse_op_kind(kinds[i])) != id)
      throw Error("/ops: op '" + names[i] + "' appears twice");
  }
  return ops;
}

std::vector<OpAggregate> read_aggregates(hid_t file, const std::string& where = "/summary/ops") {
  const h5::Table table = h5::read_table(file, where);
  std::vector<OpAggregate> ops(row_count(table));
  for (const TextField& field : kAggregateText) {
    if (is_attribution_field(field.name) && h5::find_column(table, field.name) == nullptr) continue;
    const auto& values = column<std::string>(table, field.name, where);
    for (size_t i = 0; i < ops.size(); ++i)
      ops[i].*field.member = values[i];
  }
  const auto& counts = column<int64_t>(table, "count", where);
  for (size_t i = 0; i < ops.size(); ++i)
    ops[i].count = counts[i];
  for (const NumberField& field : kAggregateNumbers) {
    if (is_attribution_field(field.name) && h5::find_column(table, field.name) == nullptr) continue;
    const auto& values = column<double>(table, field.name, where);
    for (size_t i = 0; i < ops.size(); ++i)
      ops[i].*field.member = values[i];
  }
  return ops;
}

bool is_step_attr(const std::string& key) {
  if (key == "count" || key == "warmup_to_steady") return true;
  for (const StepField& field : kStepFields)
    if (key == field.name) return true;
  return false;
}

RunSummary read_summary(hid_t file, const std::string& base = "") {
  const std::string where = base + "/summary";
  h5::Handle group = h5::open_group(file, where);
  RunSummary summary;
  summary.step_ns = h5::read_vector<double>(group.id(), "step_time_ns");
  summary.warmup_step_ns = h5::read_vector<double>(group.id(), "warmup_step_time_ns");
  if (h5::exists(group.id(), "decode_context"))
    summary.step_context = h5::read_vector<int64_t>(group.id(), "decode_context");
  Attrs attrs = h5::read_attrs(group.id());
  summary.step.count = static_cast<size_t>(int_attr(attrs, "count", where));
  for (const StepField& field : kStepFields)
    summary.step.*field.member = number_attr(attrs, field.name, where);
  summary.warmup_to_steady = int_attr(attrs, "warmup_to_steady", where);
  for (auto& entry : attrs)
    if (!is_step_attr(entry.first)) summary.attrs.push_back(std::move(entry));
  summary.ops = read_aggregates(file, where + "/ops");
  return summary;
}

// Every compound dataset below `path` (recursively) as a NamedTable, in creation order.
void read_tables_below(hid_t file, const std::string& path, std::vector<NamedTable>& out) {
  h5::Handle group = h5::open_group(file, path);
  for (const std::string& name : h5::list_children(group.id())) {
    const std::string child = (path == "/" ? "" : path) + "/" + name;
    h5::Handle object(H5Oopen(file, child.c_str(), H5P_DEFAULT), "H5Oopen", child);
    const H5I_type_t type = H5Iget_type(object.id());
    if (type == H5I_GROUP) {
      read_tables_below(file, child, out);
      continue;
    }
    if (type != H5I_DATASET) continue;
    h5::Handle dtype(H5Dget_type(object.id()), "H5Dget_type", child);
    if (H5Tget_class(dtype.id()) != H5T_COMPOUND) continue;
    out.push_back({child, h5::read_table(file, child), h5::read_attrs(object.id())});
  }
}

// The NamedTables of a file: every table outside the run layout's own groups.
std::vector<NamedTable> read_tables(hid_t file) {
  std::vector<NamedTable> tables;
  for (const std::string& name : h5::list_children(file)) {
    if (std::find_if(std::begin(kLayoutGroups), std::end(kLayoutGroups),
                     [&](const char* g) { return name == g; }) != std::end(kLayoutGroups))
      continue;
    h5::Handle object(H5Oopen(file, name.c_str(), H5P_DEFAULT), "H5Oopen", "/" + name);
    if (H5Iget_type(object.id()) == H5I_GROUP) read_tables_below(file, "/" + name, tables);
  }
  return tables;
}

std::string version_problem(int64_t version) {
  return "/: schema_version " + std::to_string(version) + " is not supported (this build reads " +
         std::to_string(kSchemaVersion) + ")";
}

RunData read_contents(const std::string& path, bool timelines) {
  h5::Handle file = h5::open_file_read(path);
  RunData data;
  data.root = h5::read_attrs(file.id());
  const int64_t version = int_attr(data.root, "schema_version", "/");
  if (version != kSchemaVersion) throw Error(version_problem(version));
  const int64_t world_size = int_attr(data.root, "world_size", "/");
  if (world_size < 1) throw Error("/: world_size " + std::to_string(world_size) + " < 1");
  const auto ranks = static_cast<size_t>(world_size);
  if (const std::optional<size_t> held = ranks_held(file.id()); held && *held != ranks)
    throw Error("/: world_size " + std::to_string(world_size) + " but /topology holds " +
                std::to_string(*held) + " ranks");

  h5::Handle stack = h5::open_group(file.id(), "/stack");
  data.stack = h5::read_attrs(stack.id());
  const h5::Table env = h5::read_table(stack.id(), "env");
  const auto& names = column<std::string>(env, "name", "/stack/env");
  const auto& values = column<std::string>(env, "value", "/stack/env");
  for (size_t i = 0; i < names.size(); ++i)
    data.env.emplace_back(names[i], values[i]);

  h5::Handle config = h5::open_group(file.id(), "/config");
  data.config = h5::read_attrs(config.id());
  data.topology = read_topology(file.id(), ranks);
  if (has_run_layout(data.root)) {
    data.ops = read_ops(file.id());
    for (size_t rank = 0; timelines && rank < ranks; ++rank)
      data.timelines.push_back(h5::read_timeline(file.id(), rank_path(rank)));
    data.summary = read_summary(file.id());
  }
  data.tables = read_tables(file.id());
  for (const char* group : {"/roofs", "/sweep"})
    if (h5::exists(file.id(), group))
      data.group_attrs.emplace_back(group, h5::read_attrs(h5::open_group(file.id(), group).id()));
  // The optional NVML samples sit inside the run layout, beside each rank's timeline.
  for (size_t rank = 0; timelines && rank < ranks; ++rank) {
    const std::string path = "/ranks/" + std::to_string(rank) + "/samples";
    if (!h5::exists(file.id(), path)) continue;
    h5::Handle dataset(H5Dopen2(file.id(), path.c_str(), H5P_DEFAULT), "H5Dopen2", path);
    data.tables.push_back({path, h5::read_table(file.id(), path), h5::read_attrs(dataset.id())});
  }
  return data;
}

// ---- validation ----

// Runs one group of checks; an exception (an unreadable object) becomes one more problem, so
// one broken object never hides problems elsewhere.
template <class Fn> void check_section(std::vector<std::string>& problems, Fn&& checks) {
  try {
    checks();
  } catch (const std::exception& e) {
    problems.emplace_back(e.what());
  }
}

bool require_object(hid_t file, const std::string& path, const char* what,
                    std::vector<std::string>& problems) {
  if (h5::exists(file, path)) return true;
  problems.push_back(path + ": missing " + what);
  return false;
}

void require_attrs(const Attrs& attrs, const std::string& where,
                   const std::vector<std::string>& keys, std::vector<std::string>& problems) {
  for (const std::string& key : keys)
    if (find_attr(attrs, key) == nullptr)
      problems.push_back(where + ": missing attribute '" + key + "'");
}

void validate_stack(hid_t file, std::vector<std::string>& problems) {
  h5::Handle stack = h5::open_group(file, "/stack");
  const Attrs stack_attrs = h5::read_attrs(stack.id());
  require_attrs(stack_attrs, "/stack", {std::begin(kStackAttrs), std::end(kStackAttrs)}, problems);
  // cuDNN's plans are recorded only beside the version of the cuDNN that chose them.
  if (find_attr(stack_attrs, "cudnn_plans") != nullptr &&
      find_attr(stack_attrs, "cudnn") == nullptr)
    problems.push_back("/stack: cudnn_plans without cudnn (the loaded cuDNN version)");
  if (!require_object(file, "/stack/env", "dataset", problems)) return;
  const h5::Table env = h5::read_table(file, "/stack/env");
  column<std::string>(env, "name", "/stack/env");
  column<std::string>(env, "value", "/stack/env");
}

// The op table at `path` (/ops, or a point's); returns the number of ops (the valid op_id range).
int64_t validate_ops(hid_t file, const std::string& path, std::vector<std::string>& problems) {
  const h5::Table table = h5::read_table(file, path);
  const auto& ids = column<int64_t>(table, "id", path);
  column<std::string>(table, "name", path);
  const auto& kinds = column<std::string>(table, "kind", path);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string row = path + ": row " + std::to_string(i) + ": ";
    if (ids[i] != static_cast<int64_t>(i))
      problems.push_back(row + "id " + std::to_string(ids[i]) + ", expected " + std::to_string(i));
    try {
      parse_op_kind(kinds[i]);
    } catch (const Error&) {
      problems.push_back(row + "unknown kind '" + kinds[i] + "'");
    }
  }
  return static_cast<int64_t>(ids.size());
}

// The `rows` attribute of a rank's group (the rows its timeline must have), or -1 when absent
// (files written before it).
int64_t recorded_rows(hid_t file, const std::string& rank_group) {
  const Attrs attrs = h5::read_attrs(h5::open_group(file, rank_group).id());
  const AttrValue* rows = find_attr(attrs, "rows");
  return rows != nullptr && std::holds_alternative<int64_t>(*rows) ? std::get<int64_t>(*rows) : -1;
}

void validate_timeline(hid_t file, const std::string& path, int64_t op_count, int64_t expected_rows,
                       std::vector<std::string>& problems) {
  if (!require_object(file, path, "dataset", problems)) return;
  const std::vector<TimelineRecord> rows = h5::read_timeline(file, path);
  if (expected_rows >= 0 && static_cast<int64_t>(rows.size()) != expected_rows)
    problems.push_back(path + ": " + std::to_string(rows.size()) + " rows, the file recorded " +
                       std::to_string(expected_rows) + " (incomplete)");
  size_t found = 0;
  auto report = [&](size_t row, const std::string& what) {
    if (++found <= kMaxRowProblems)
      problems.push_back(path + ": row " + std::to_string(row) + ": " + what);
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const TimelineRecord& row = rows[i];
    if (row.op_id < 0 || (op_count >= 0 && row.op_id >= op_count))
      report(i, "op_id " + std::to_string(row.op_id) + " outside [0, " +
                    (op_count >= 0 ? std::to_string(op_count) : "?") + ")");
    if (row.t_start_ns < 0) report(i, "t_start_ns " + std::to_string(row.t_start_ns) + " < 0");
    for (const auto& [name, value] : {std::pair<const char*, double>{"flops", row.flops},
                                      {"hbm_bytes", row.hbm_bytes},
                                      {"comm_bytes", row.comm_bytes}})
      if (!(std::isfinite(value) && value >= 0))
        report(i, std::string(name) + " is " + number_text(value) + ", expected finite >= 0");
    if (row.t_end_ns < row.t_start_ns) report(i, "t_end_ns < t_start_ns");
    if (row.lane >= kLaneCount) report(i, "lane " + std::to_string(row.lane) + " not in {0, 1, 2}");
    if (row.warmup > 1) report(i, "warmup " + std::to_string(row.warmup) + " not in {0, 1}");
  }
  if (found > kMaxRowProblems)
    problems.push_back(path + ": " + std::to_string(found - kMaxRowProblems) +
                       " more row problems");
}

// Optional NVML samples of a rank's GPU: the six fields, times in order.
void validate_samples(hid_t file, const std::string& path, std::vector<std::string>& problems) {
  if (!h5::exists(file, path)) return;
  const h5::Table table = h5::read_table(file, path);
  for (const char* field : {"t_ns", "sm_clock_mhz", "mem_clock_mhz", "power_w", "power_avg_w",
                            "temp_c", "clock_event_reasons"})
    if (h5::find_column(table, field) == nullptr)
      problems.push_back(path + ": missing field " + field);
  const h5::Column* t = h5::find_column(table, "t_ns");
  if (t == nullptr) return;
  const auto* values = std::get_if<std::vector<int64_t>>(&t->values);
  if (values == nullptr) {
    problems.push_back(path + ": t_ns is not an integer field");
    return;
  }
  for (size_t i = 1; i < values->size(); ++i)
    if ((*values)[i] < (*values)[i - 1]) {
      problems.push_back(path + ": t_ns decreases at row " + std::to_string(i));
      return;
    }
}

// /ranks holds exactly the groups 0 .. world_size-1 (world_size < 0: unknown, not checked).
// Objects in `unreadable` (links into missing or foreign files, already reported) are skipped.
void validate_ranks(hid_t file, int64_t world_size, int64_t op_count,
                    const std::set<std::string>& unreadable, std::vector<std::string>& problems) {
  h5::Handle ranks = h5::open_group(file, "/ranks");
  const std::vector<std::string> children = h5::list_children(ranks.id());
  std::set<std::string> expected;
  for (int64_t rank = 0; rank < world_size; ++rank)
    expected.insert(std::to_string(rank));
  for (const std::string& name : expected)
    if (std::find(children.begin(), children.end(), name) == children.end())
      problems.push_back("/ranks/" + name + ": missing group");
  for (const std::string& name : children) {
    if (world_size >= 0 && expected.count(name) == 0) {
      problems.push_back("/ranks/" + name + ": unexpected (world_size is " +
                         std::to_string(world_size) + ")");
      continue;
    }
    const std::string group = "/ranks/" + name;
    check_section(problems, [&] {
      if (unreadable.count(group + "/timeline") == 0)
        validate_timeline(file, group + "/timeline", op_count, recorded_rows(file, group),
                          problems);
      if (unreadable.count(group + "/samples") == 0)
        validate_samples(file, group + "/samples", problems);
    });
  }
}

// Per-node layout: every external link below /ranks and /points/<k>/ranks must lead into a file
// that exists (relative names: beside this one), belongs to this file set (root attribute
// `file_set`, new at every write) and holds the linked object. Returns the links that cannot be
// followed; each missing or foreign file is reported once.
std::set<std::string> validate_links(hid_t file, const std::string& path, const Attrs& root,
                                     std::vector<std::string>& problems) {
  std::set<std::string> unreadable;
  const AttrValue* set_attr = find_attr(root, "file_set");
  if (set_attr == nullptr)
    problems.emplace_back("/: missing attribute 'file_set' (per-node layout)");
  const std::string file_set = set_attr ? attr_to_string(*set_attr) : "";
  std::vector<std::string> bases;
  if (h5::exists(file, "/ranks")) bases.emplace_back("/ranks");
  if (h5::exists(file, "/points"))
    for (const std::string& k : h5::list_children(h5::open_group(file, "/points").id()))
      if (h5::exists(file, "/points/" + k + "/ranks")) bases.push_back("/points/" + k + "/ranks");
  // Linked file -> (link path, object path) pairs, in the order met.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> targets;
  for (const std::string& base : bases)
    for (const std::string& rank : h5::list_children(h5::open_group(file, base).id())) {
      h5::Handle group = h5::open_group(file, base + "/" + rank);
      for (const std::string& name : h5::list_children(group.id())) {
        const std::optional<h5::ExternalLink> link = h5::external_link(group.id(), name);
        if (!link) continue;
        auto it = std::find_if(targets.begin(), targets.end(),
                               [&](const auto& t) { return t.first == link->file; });
        if (it == targets.end()) it = targets.insert(targets.end(), {link->file, {}});
        it->second.emplace_back(base + "/" + rank + "/" + name, link->object);
      }
    }
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  for (const auto& [name, links] : targets) {
    const std::filesystem::path target =
        std::filesystem::path(name).is_absolute() ? std::filesystem::path(name) : directory / name;
    const std::string first =
        links.front().first +
        (links.size() > 1 ? " (and " + std::to_string(links.size() - 1) + " more links)" : "");
    std::string problem = open_problem(target.string());
    if (problem.empty()) {
      try {
        h5::Handle part = h5::open_file_read(target.string());
        const Attrs attrs = h5::read_attrs(part.id());
        const AttrValue* part_set = find_attr(attrs, "file_set");
        if (part_set == nullptr || attr_to_string(*part_set) != file_set) {
          problem = "linked file '" + name + "' belongs to another write (file_set " +
                    (part_set ? attr_to_string(*part_set) : std::string("absent")) + ", expected " +
                    file_set + ")";
        } else {
          for (const auto& [link, object] : links)
            if (!h5::exists(part.id(), object)) {
              problems.push_back(link + ": linked file '" + name + "' has no " + object);
              unreadable.insert(link);
            }
          continue;
        }
      } catch (const std::exception& e) {
        problem = "linked file '" + name + "': " + e.what();
      }
    } else {
      problem = "linked file '" + name + "' " +
                (std::filesystem::exists(target) ? problem.substr(target.string().size() + 2)
                                                 : "does not exist");
    }
    problems.push_back(first + ": " + problem);
    for (const auto& link : links)
      unreadable.insert(link.first);
  }
  return unreadable;
}

void validate_topology(hid_t file, int64_t world_size, std::vector<std::string>& problems) {
  h5::Handle topology = h5::open_group(file, "/topology");
  for (const std::string& key : h5::list_children(topology.id()))
    check_section(problems, [&] {
      const size_t size = h5::column_size(h5::read_dataset(topology.id(), key));
      if (world_size >= 0 && size != static_cast<size_t>(world_size))
        problems.push_back("/topology/" + key + ": " + std::to_string(size) +
                           " values, expected world_size " + std::to_string(world_size));
    });
}

// output_checksum (added within schema version 1, absent from older files): 16 lowercase hex
// digits, with the name of its algorithm.
void validate_checksum(const Attrs& attrs, const std::string& where,
                       std::vector<std::string>& problems) {
  const AttrValue* sum = find_attr(attrs, "output_checksum");
  const AttrValue* algorithm = find_attr(attrs, "output_checksum_algorithm");
  if (sum == nullptr && algorithm == nullptr) return;
  if (sum == nullptr) {
    problems.push_back(
        where + ": missing attribute 'output_checksum' (output_checksum_algorithm is given)");
  } else {
    const auto* text = std::get_if<std::string>(sum);
    const bool hex = text != nullptr && text->size() == 16 &&
                     std::all_of(text->begin(), text->end(), [](char c) {
                       return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                     });
    if (!hex)
      problems.push_back(where +
                         ": output_checksum must be 16 lowercase hexadecimal digits, found '" +
                         attr_to_string(*sum) + "'");
  }
  if (algorithm == nullptr)
    problems.push_back(where + ": missing attribute 'output_checksum_algorithm'");
  else if (*algorithm != AttrValue(std::string(kOutputChecksumAlgorithm)))
    problems.push_back(where + ": output_checksum_algorithm '" + attr_to_string(*algorithm) +
                       "' is not " + kOutputChecksumAlgorithm);
}

// The rank -> GPU map in /topology: element r is rank r, each (host, local_rank) is one rank,
// a rank's device is one it could see, and the ranks of a host on one GPU (by UUID, else PCI
// bus id) are as many as each one's gpu_shared_by says; more than one only where the job was
// allowed to share GPUs (/config allow_shared_gpu; files written before that key are not
// checked for sharing).
void validate_gpu_map(hid_t file, std::vector<std::string>& problems) {
  h5::Handle topology = h5::open_group(file, "/topology");
  const auto has = [&](const char* key) { return h5::exists(topology.id(), key); };
  if (!has("rank") || !has("host") || !has("local_rank")) return;
  const auto ranks = h5::read_vector<int64_t>(topology.id(), "rank");
  const auto hosts = h5::read_vector<std::string>(topology.id(), "host");
  const auto local = h5::read_vector<int64_t>(topology.id(), "local_rank");
  const size_t n = std::min({ranks.size(), hosts.size(), local.size()});
  std::map<std::pair<std::string, int64_t>, size_t> seats;
  for (size_t r = 0; r < n; ++r) {
    if (ranks[r] != static_cast<int64_t>(r))
      problems.push_back("/topology/rank: element " + std::to_string(r) + " is " +
                         std::to_string(ranks[r]));
    if (const auto [it, fresh] = seats.emplace(std::make_pair(hosts[r], local[r]), r); !fresh)
      problems.push_back("/topology: ranks " + std::to_string(it->second) + " and " +
                         std::to_string(r) + " are both local rank " + std::to_string(local[r]) +
                         " of host " + hosts[r]);
  }
  if (!has("device")) return;
  const auto devices = h5::read_vector<int64_t>(topology.id(), "device");
  if (has("gpus_visible")) {
    const auto visible = h5::read_vector<int64_t>(topology.id(), "gpus_visible");
    for (size_t r = 0; r < std::min(n, std::min(devices.size(), visible.size())); ++r)
      if (devices[r] >= visible[r])
        problems.push_back("/topology: rank " + std::to_string(r) + " uses device " +
                           std::to_string(devices[r]) + " but saw " + std::to_string(visible[r]) +
                           " GPUs");
  }
  std::vector<std::string> ids(n);
  for (const char* key : {"gpu_pci_bus_id", "gpu_uuid"})
    if (has(key)) {
      const auto values = h5::read_vector<std::string>(topology.id(), key);
      for (size_t r = 0; r < std::min(n, values.size()); ++r)
        if (!values[r].empty()) ids[r] = values[r];
    }
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> by_gpu;
  for (size_t r = 0; r < std::min(n, devices.size()); ++r)
    if (devices[r] >= 0 && !ids[r].empty()) by_gpu[{hosts[r], ids[r]}].push_back(r);
  if (has("gpu_shared_by")) {
    const auto shared_by = h5::read_vector<int64_t>(topology.id(), "gpu_shared_by");
    for (const auto& [gpu, members] : by_gpu)
      for (size_t r : members)
        if (r < shared_by.size() && shared_by[r] != static_cast<int64_t>(members.size()))
          problems.push_back("/topology: rank " + std::to_string(r) + " says " +
                             std::to_string(shared_by[r]) + " ranks share its GPU " + gpu.second +
                             " but " + std::to_string(members.size()) + " ranks of host " +
                             gpu.first + " use it");
  }
  const Attrs config = h5::read_attrs(h5::open_group(file, "/config").id());
  const AttrValue* allowed = find_attr(config, "allow_shared_gpu");
  if (allowed == nullptr) return;
  const auto* flag = std::get_if<int64_t>(allowed);
  if (flag != nullptr && *flag != 0) return;
  for (const auto& [gpu, members] : by_gpu)
    if (members.size() > 1) {
      std::string list;
      for (size_t r : members)
        list += (list.empty() ? "" : ", ") + std::to_string(r);
      problems.push_back("/topology: ranks " + list + " of host " + gpu.first + " share GPU " +
                         gpu.second + " but /config allow_shared_gpu is 0");
    }
}

// --decode-steps: `base`/summary/decode_context (keys per timed iteration) and decode_bins.
void validate_decode(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  const std::string group = base + "/summary";
  int64_t steps = 0;
  const std::string config = base + "/config";
  if (h5::exists(file, config)) {
    const Attrs attrs = h5::read_attrs(h5::open_group(file, config).id());
    if (const AttrValue* v = find_attr(attrs, "decode_steps"))
      if (const auto* n = std::get_if<int64_t>(v)) steps = *n;
  }
  const std::string ctx_path = group + "/decode_context";
  if (steps <= 0 && !h5::exists(file, ctx_path)) return;
  if (!require_object(file, ctx_path, "dataset", problems)) return;
  const std::vector<int64_t> ctx = h5::read_vector<int64_t>(file, ctx_path);
  const std::vector<double> times = h5::read_vector<double>(file, group + "/step_time_ns");
  if (ctx.size() != times.size())
    problems.push_back(ctx_path + ": " + std::to_string(ctx.size()) + " entries but " +
                       std::to_string(times.size()) + " timed iterations");
  for (size_t i = 0; i < ctx.size(); ++i)
    if (ctx[i] < 1) {
      problems.push_back(ctx_path + ": entry " + std::to_string(i) + " is " +
                         std::to_string(ctx[i]) + ", expected >= 1");
      break;
    }
  const std::string bins_path = group + "/decode_bins";
  if (!require_object(file, bins_path, "dataset", problems)) return;
  const h5::Table table = h5::read_table(file, bins_path);
  const auto& first = column<int64_t>(table, "context_first", bins_path);
  const auto& last = column<int64_t>(table, "context_last", bins_path);
  const auto& tokens = column<int64_t>(table, "tokens", bins_path);
  const auto& p50 = column<double>(table, "p50_ns", bins_path);
  const auto& p95 = column<double>(table, "p95_ns", bins_path);
  const auto& p99 = column<double>(table, "p99_ns", bins_path);
  column<double>(table, "mean_ns", bins_path);
  int64_t total = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    const std::string row = bins_path + ": row " + std::to_string(i) + ": ";
    total += tokens[i];
    if (!(first[i] >= 1 && first[i] <= last[i]))
      problems.push_back(row + "expected 1 <= context_first <= context_last");
    if (tokens[i] < 1) problems.push_back(row + "tokens must be >= 1");
    if (!(p50[i] > 0 && p50[i] <= p95[i] && p95[i] <= p99[i]))
      problems.push_back(row + "expected 0 < p50_ns <= p95_ns <= p99_ns");
  }
  if (total != static_cast<int64_t>(ctx.size()))
    problems.push_back(bins_path + ": the bins hold " + std::to_string(total) +
                       " tokens but decode_context has " + std::to_string(ctx.size()));
}

// The summary's schedule as schedule_name() writes it: gpipe, 1f1b, zb-h1 or interleaved:V
// (V >= 2, decimal, no leading zero).
bool is_schedule_name(const std::string& name) {
  if (name == "gpipe" || name == "1f1b" || name == "zb-h1") return true;
  const std::string prefix = "interleaved:";
  if (name.rfind(prefix, 0) != 0) return false;
  const std::string v = name.substr(prefix.size());
  if (v.empty() || v.size() > 9 || v[0] == '0' ||
      !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  return std::stol(v) >= 2;
}

// Scheduled pipelines (`base`/config phase train, or a schedule given): the schedule's
// summary attributes, the four per-stage figures of every stage, bubbles in [0, 1], what the
// check compared; for train, the backward ops (and the stage's own) in the op table where it
// was kept. Files written before the train phase have no `schedule` in /config: not checked.
void validate_pipeline(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  const std::string config_path = base + "/config";
  if (!h5::exists(file, config_path)) return;
  const Attrs config = h5::read_attrs(h5::open_group(file, config_path).id());
  auto text = [&](const char* key) {
    const AttrValue* v = find_attr(config, key);
    const auto* s = v ? std::get_if<std::string>(v) : nullptr;
    return s ? *s : std::string();
  };
  auto integer = [&](const char* key, int64_t fallback) {
    const AttrValue* v = find_attr(config, key);
    const auto* i = v ? std::get_if<int64_t>(v) : nullptr;
    return i ? *i : fallback;
  };
  const std::string phase = text("phase");
  const bool train = phase == "train";
  if (!train && text("schedule").empty()) return;

  const std::string group = base + "/summary";
  const Attrs attrs = h5::read_attrs(h5::open_group(file, group).id());
  const AttrValue* pp_value = find_attr(config, "pp");
  const auto* pp = pp_value ? std::get_if<int64_t>(pp_value) : nullptr;
  if (pp == nullptr || *pp < 1) {
    problems.push_back(config_path + ": pp must be an integer >= 1 (a scheduled pipeline's "
                                     "stages)");
    return;
  }
  // Four attributes per stage: more stages than the summary has attributes is one problem, not
  // a list of missing keys as long as the (damaged) pp.
  if (static_cast<uint64_t>(*pp) > attrs.size()) {
    problems.push_back(config_path + ": pp " + std::to_string(*pp) + " but " + group + " has " +
                       std::to_string(attrs.size()) + " attributes, not a stage's four each");
    return;
  }
  std::vector<std::string> keys = {"schedule", "microbatches", "recompute", "bubble_theory",
                                   "check_compares"};
  const char* const stage_fields[] = {"bubble", "p2p_exposed_ns", "dp_exposed_ns",
                                      "peak_activation_bytes"};
  for (int64_t p = 0; p < *pp; ++p)
    for (const char* field : stage_fields)
      keys.push_back("stage" + std::to_string(p) + "." + field);
  // Train with a pipeline: the measured action times and the simulated bubble.
  const bool timed_actions = train && *pp > 1;
  const AttrValue* schedule_value = find_attr(attrs, "schedule");
  const bool split = schedule_value && std::holds_alternative<std::string>(*schedule_value) &&
                     std::get<std::string>(*schedule_value) == "zb-h1";
  std::vector<std::string> action_keys;
  if (timed_actions) action_keys = {"action_forward_ns", "action_backward_ns"};
  if (timed_actions && split)
    action_keys.insert(action_keys.end(),
                       {"action_backward_input_ns", "action_backward_weight_ns"});
  keys.insert(keys.end(), action_keys.begin(), action_keys.end());
  if (timed_actions) keys.emplace_back("bubble_simulated");
  require_attrs(attrs, group, keys, problems);

  auto string_attr = [&](const char* key) -> std::optional<std::string> {
    const AttrValue* v = find_attr(attrs, key);
    if (v == nullptr) return std::nullopt;
    if (const auto* s = std::get_if<std::string>(v)) return *s;
    problems.push_back(group + ": attribute '" + key + "' is not a string");
    return std::nullopt;
  };
  if (const auto schedule = string_attr("schedule"); schedule && !is_schedule_name(*schedule))
    problems.push_back(group + ": schedule is '" + *schedule +
                       "', expected gpipe, 1f1b, interleaved:V (V >= 2) or zb-h1");
  if (const auto recompute = string_attr("recompute");
      recompute && *recompute != "none" && *recompute != "full")
    problems.push_back(group + ": recompute is '" + *recompute + "', expected none or full");
  if (const auto compares = string_attr("check_compares")) {
    const std::string expected = train ? "gradients" : "outputs";
    if (*compares != "gradients" && *compares != "outputs")
      problems.push_back(group + ": check_compares is '" + *compares +
                         "', expected gradients or outputs");
    else if (*compares != expected)
      problems.push_back(group + ": check_compares is '" + *compares + "' but " + config_path +
                         " phase is " + phase + " (expected " + expected + ")");
  }
  if (const AttrValue* v = find_attr(attrs, "microbatches")) {
    const auto* n = std::get_if<int64_t>(v);
    if (n == nullptr || *n < 1)
      problems.push_back(group + ": microbatches must be an integer >= 1, found '" +
                         attr_to_string(*v) + "'");
  }
  auto number = [&](const std::string& key) -> std::optional<double> {
    const AttrValue* v = find_attr(attrs, key);
    if (v == nullptr) return std::nullopt;
    if (const auto* d = std::get_if<double>(v)) return *d;
    if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
    problems.push_back(group + ": attribute '" + key + "' is not a number");
    return std::nullopt;
  };
  auto fraction = [&](const std::string& key) {
    if (const auto x = number(key); x && !(*x >= 0 && *x <= 1))
      problems.push_back(group + ": " + key + " must be in [0, 1], found " + number_text(*x));
  };
  auto non_negative = [&](const std::string& key) {
    if (const auto x = number(key); x && !(*x >= 0))
      problems.push_back(group + ": " + key + " must be >= 0, found " + number_text(*x));
  };
  fraction("bubble_theory");
  fraction("bubble_simulated");
  for (const std::string& key : action_keys)
    if (const auto x = number(key); x && !(*x > 0))
      problems.push_back(group + ": " + key + " must be > 0, found " + number_text(*x));
  for (int64_t p = 0; p < *pp; ++p) {
    const std::string stage = "stage" + std::to_string(p) + ".";
    fraction(stage + "bubble");
    for (const char* field : {"p2p_exposed_ns", "dp_exposed_ns", "peak_activation_bytes"})
      non_negative(stage + field);
  }

  const std::string ops_path = base + "/ops";
  if (!h5::exists(file, ops_path)) return;
  const h5::Table table = h5::read_table(file, ops_path);
  const auto& names = column<std::string>(table, "name", ops_path);
  const std::set<std::string> present(names.begin(), names.end());
  std::vector<std::string> required = {op::pp_exchange, op::pp_flush};
  if (train) {
    for (const char* name :
         {op::fc2_dgrad, op::fc2_wgrad, op::act_bwd, op::fc1_dgrad, op::fc1_wgrad, op::norm2_bwd,
          op::residual2_bwd, op::proj_dgrad, op::proj_wgrad, op::attention_bwd, op::qkv_dgrad,
          op::qkv_wgrad, op::norm1_bwd, op::residual1_bwd, op::grad_zero})
      required.emplace_back(name);
    if (text("rotary") == "on") required.emplace_back(op::rotary_bwd);
    if (integer("tp", 1) > 1 && integer("sequence_parallel", 0) != 0) {
      for (const char* name :
           {op::allgather_mlp_bwd, op::reducescatter_mlp_bwd, op::allgather_attn_bwd,
            op::reducescatter_attn_bwd, op::allreduce_norm_grads})
        required.emplace_back(name);
    } else if (integer("tp", 1) > 1) {
      required.emplace_back(op::allreduce_mlp_bwd);
      required.emplace_back(op::allreduce_attn_bwd);
    }
    if (integer("dp", 1) > 1)
      required.emplace_back(integer("dp_shard", 0) != 0 ? op::dp_reducescatter : op::dp_allreduce);
    const AttrValue* lr = find_attr(config, "sgd_lr");
    const auto* rate = lr ? std::get_if<double>(lr) : nullptr;
    if (rate != nullptr && *rate > 0) required.emplace_back(op::sgd_update);
  }
  for (const std::string& name : required)
    if (present.count(name) == 0)
      problems.push_back(ops_path + ": missing op '" + name + "' (" +
                         (train ? "a train run" : "a scheduled pipeline") + " records it)");
}

// The summary group `base`/summary (base: "" for /summary, or a point's group).
void validate_summary(hid_t file, const std::string& base, std::vector<std::string>& problems) {
  const std::string group = base + "/summary";
  check_section(problems, [&] {
    const std::string path = group + "/step_time_ns";
    if (!require_object(file, path, "dataset", problems)) return;
    const std::vector<double> steps = h5::read_vector<double>(file, path);
    if (steps.empty()) problems.push_back(path + ": empty");
    for (size_t i = 0; i < steps.size(); ++i)
      if (!(steps[i] > 0)) {
        problems.push_back(path + ": value " + std::to_string(i) + " is " + number_text(steps[i]) +
                           ", expected > 0");
        break;
      }
  });
  check_section(problems, [&] {
    const std::string path = group + "/warmup_step_time_ns";
    if (!require_object(file, path, "dataset", problems)) return;
    const std::vector<double> steps = h5::read_vector<double>(file, path);
    for (size_t i = 0; i < steps.size(); ++i)
      if (!(steps[i] > 0 && std::isfinite(steps[i]))) {
        problems.push_back(path + ": value " + std::to_string(i) + " is " + number_text(steps[i]) +
                           ", expected > 0");
        break;
      }
  });
  check_section(problems, [&] {
    h5::Handle summary = h5::open_group(file, group);
    const Attrs attrs = h5::read_attrs(summary.id());
    std::vector<std::string> keys = {"count", "warmup_to_steady"};
    for (const StepField& field : kStepFields)
      keys.emplace_back(field.name);
    require_attrs(attrs, group, keys, problems);
    validate_checksum(attrs, group, problems);
    if (const AttrValue* a = find_attr(attrs, "attention")) {
      const std::string* name = std::get_if<std::string>(a);
      if (name == nullptr || (*name != "fused" && *name != "naive" && *name != "cudnn"))
        problems.push_back(group + ": attention is '" + attr_to_string(*a) +
                           "', expected fused, naive or cudnn");
    }
    if (find_attr(attrs, "p50_ns") == nullptr || find_attr(attrs, "p95_ns") == nullptr ||
        find_attr(attrs, "p99_ns") == nullptr)
      return;
    const double p50 = number_attr(attrs, "p50_ns", group);
    const double p95 = number_attr(attrs, "p95_ns", group);
    const double p99 = number_attr(attrs, "p99_ns", group);
    if (!(p50 <= p95 && p95 <= p99))
      problems.push_back(group + ": expected p50_ns <= p95_ns <= p99_ns, found " +
                         number_text(p50) + ", " + number_text(p95) + ", " + number_text(p99));
  });
  check_section(problems, [&] {
    if (!require_object(file, group + "/ops", "dataset", problems)) return;
    for (const OpAggregate& a : read_aggregates(file, group + "/ops")) {
      const std::pair<const char*, double> fields[] = {{"p50_ns", a.p50_ns},
                                                       {"mean_ns", a.mean_ns},
                                                       {"per_step_p50_ns", a.per_step_p50_ns},
                                                       {"share", a.share},
                                                       {"flops", a.flops},
                                                       {"hbm_bytes", a.hbm_bytes},
                                                       {"comm_bytes", a.comm_bytes},
                                                       {"bound_ns", a.bound_ns},
                                                       {"efficiency", a.efficiency}};
      for (const auto& [name, value] : fields)
        if (!(std::isfinite(value) && value >= 0)) {
          problems.push_back(group + "/ops: op " + a.name + ": " + name + " is " +
                             number_text(value) + ", expected a finite value >= 0");
          break;
        }
    }
  });
  check_section(problems, [&] { validate_decode(file, base, problems); });
  check_section(problems, [&] { validate_pipeline(file, base, problems); });
}

// One /collectives/<name> result table: the documented columns, sane rows.
void validate_result_table(hid_t file, const std::string& path,
                           std::vector<std::string>& problems) {
  const h5::Table table = h5::read_table(file, path);
  for (const char* name : kResultIntColumns)
    column<int64_t>(table, name, path);
  for (const char* name : kResultNumberColumns)
    column<double>(table, name, path);
  const auto& sizes = column<int64_t>(table, "size_bytes", path);
  const auto& wrong = column<int64_t>(table, "wrong", path);
  const auto& iters = column<int64_t>(table, "iters", path);
  const auto& minimum = column<double>(table, "time_min_ns", path);
  const auto& p50 = column<double>(table, "time_p50_ns", path);
  const auto& p95 = column<double>(table, "time_p95_ns", path);
  const auto& p99 = column<double>(table, "time_p99_ns", path);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string row = path + ": row " + std::to_string(i) + ": ";
    if (sizes[i] <= 0) problems.push_back(row + "size_bytes must be > 0");
    if (wrong[i] < 0) problems.push_back(row + "wrong must be >= 0");
    if (iters[i] <= 0) problems.push_back(row + "iters must be > 0");
    if (!(minimum[i] > 0 && minimum[i] <= p50[i] && p50[i] <= p95[i] && p95[i] <= p99[i]))
      problems.push_back(row + "expected 0 < time_min_ns <= time_p50_ns <= time_p95_ns <= " +
                         "time_p99_ns, found " + number_text(minimum[i]) + ", " +
                         number_text(p50[i]) + ", " + number_text(p95[i]) + ", " +
                         number_text(p99[i]));
  }
}

void validate_samples_table(hid_t file, const std::string& path,
                            std::vector<std::string>& problems) {
  const h5::Table table = h5::read_table(file, path);
  column<int64_t>(table, "size_index", path);
  column<int64_t>(table, "iteration", path);
  const auto& times = column<double>(table, "time_ns", path);
  for (size_t i = 0; i < times.size(); ++i)
    if (!(times[i] > 0)) {
      problems.push_back(path + ": row " + std::to_string(i) + ": time_ns must be > 0");
      break;
    }
}

void validate_collectives(hid_t file, std::vector<std::string>& problems) {
  h5::Handle group = h5::open_group(file, "/collectives");
  const std::vector<std::string> children = h5::list_children(group.id());
  if (children.empty()) problems.emplace_back("/collectives: empty");
  for (const std::string& name : children)
    check_section(problems, [&] {
      const std::string path = "/collectives/" + name;
      if (ends_with(name, kSamplesSuffix)) {
        validate_samples_table(file, path, problems);
        return;
      }
      validate_result_table(file, path, problems);
      // A sweep on symmetric buffers names the window it ran in.
      if (ends_with(name, "_symm")) {
        h5::Handle table(H5Oopen(file, path.c_str(), H5P_DEFAULT), "H5Oopen", path);
        const Attrs attrs = h5::read_attrs(table.id());
        const AttrValue* buffers = find_attr(attrs, "buffers");
        if (buffers == nullptr || !std::holds_alternative<std::string>(*buffers) ||
            std::get<std::string>(*buffers).empty() ||
            std::get<std::string>(*buffers) == "ordinary")
          problems.push_back(path + ": a _symm sweep needs the attribute buffers naming its " +
                             "symmetric window");
      }
    });
}

void validate_roof(hid_t file, std::vector<std::string>& problems, bool envelope_required) {
  if (!require_object(file, kRoofPath, "dataset", problems)) return;
  const h5::Table table = h5::read_table(file, kRoofPath);
  const bool envelope =
      envelope_required || h5::find_column(table, kRoofEnvelopeColumns[0]) != nullptr;
  if (envelope)
    for (const char* name : kRoofEnvelopeColumns)
      column<double>(table, name, kRoofPath);
  for (const char* name : kRoofTextColumns)
    column<std::string>(table, name, kRoofPath);
  for (const char* name : kRoofIntColumns)
    column<int64_t>(table, name, kRoofPath);
  for (const char* name : kRoofNumberColumns)
    column<double>(table, name, kRoofPath);
  const auto& alpha = column<double>(table, "alpha_us", kRoofPath);
  const auto& beta = column<double>(table, "beta_gbps", kRoofPath);
  for (size_t i = 0; i < alpha.size(); ++i) {
    if (!(alpha[i] >= 0 && beta[i] > 0))
      problems.push_back(std::string(kRoofPath) + ": row " + std::to_string(i) +
                         ": expected alpha_us >= 0 and beta_gbps > 0, found " +
                         number_text(alpha[i]) + ", " + number_text(beta[i]));
    if (!envelope) continue;
    const double floor_alpha = column<double>(table, "floor_alpha_us", kRoofPath)[i];
    const double floor_beta = column<double>(table, "floor_beta_gbps", kRoofPath)[i];
    if (!(floor_alpha >= 0 && floor_beta > 0))
      problems.push_back(std::string(kRoofPath) + ": row " + std::to_string(i) +
                         ": expected floor_alpha_us >= 0 and floor_beta_gbps > 0, found " +
                         number_text(floor_alpha) + ", " + number_text(floor_beta));
  }
}

// A table with the given fields and types (each a problem when missing or mistyped).
void validate_fields(hid_t file, const RoofTable& spec, std::vector<std::string>& problems) {
  if (!require_object(file, spec.path, "dataset", problems)) return;
  const h5::Table table = h5::read_table(file, spec.path);
  for (const char* name : spec.text)
    check_section(problems, [&] { column<std::string>(table, name, spec.path); });
  for (const char* name : spec.ints)
    check_section(problems, [&] { column<int64_t>(table, name, spec.path); });
  for (const char* name : spec.numbers)
    check_section(problems, [&] { column<double>(table, name, spec.path); });
}

// /roofs of roofs, run and sweep files: every table with its fields, positive rates.
void validate_roofs(hid_t file, std::vector<std::string>& problems) {
  for (const RoofTable& spec : kRoofTables)
    check_section(problems, [&] {
      validate_fields(file, spec, problems);
      if (!h5::exists(file, spec.path)) return;
      const h5::Table table = h5::read_table(file, spec.path);
      const char* rate = spec.numbers.size() > 2 ? spec.numbers[2] : spec.numbers[0];
      const auto& values = column<double>(table, rate, spec.path);
      for (size_t i = 0; i < values.size(); ++i)
        if (!(values[i] > 0))
          problems.push_back(std::string(spec.path) + ": row " + std::to_string(i) + ": " + rate +
                             " must be > 0, found " + number_text(values[i]));
    });
  check_section(problems, [&] { validate_roof(file, problems, true); });
}

// The /config attributes a reader acts on, with their types: a wrong type must not turn into
// a default downstream (a tp stored as text read as tp = 1). Values are not ranged here: 0 and
// -1 stand for "the default" in a sweep's base configuration.
struct ConfigKey {
  const char* name;
  bool integer; ///< else text
};
constexpr ConfigKey kConfigKeys[] = {
    {"tp", true},       {"pp", true},         {"dp", true},           {"batch", true},
    {"seq", true},      {"layers", true},     {"hidden", true},       {"heads", true},
    {"kv_heads", true}, {"ffn_hidden", true}, {"microbatches", true}, {"iters", true},
    {"warmup", true},   {"context", true},    {"phase", false},       {"dtype", false},
    {"overlap", false}, {"backend", false},   {"transport", false}};

void validate_config(const Attrs& attrs, const std::string& where,
                     std::vector<std::string>& problems) {
  for (const ConfigKey& key : kConfigKeys) {
    const AttrValue* value = find_attr(attrs, key.name);
    if (value == nullptr) continue;
    const bool text = std::holds_alternative<std::string>(*value);
    if (key.integer && !std::holds_alternative<int64_t>(*value))
      problems.push_back(where + ": " + key.name + " must be an integer, found " +
                         (text ? "the string '" + attr_to_string(*value) + "'"
                               : "the number " + attr_to_string(*value)));
    if (!key.integer && !text)
      problems.push_back(where + ": " + key.name + " must be a string, found " +
                         attr_to_string(*value));
  }
}

// Every /points/<k>: its config; a summary as /summary's unless the point failed (status
// "failed: ..."); where its ops were kept, the op table and a timeline per rank, as /ops and
// /ranks/<r>/timeline (a timeline of a node file that cannot be opened is reported once,
// elsewhere).
void validate_points(hid_t file, int64_t world_size, const std::set<std::string>& unreadable,
                     bool predicted_file, std::vector<std::string>& problems) {
  h5::Handle points = h5::open_group(file, "/points");
  for (const std::string& k : h5::list_children(points.id())) {
    const std::string base = "/points/" + k;
    if (require_object(file, base + "/config", "group", problems))
      validate_config(h5::read_attrs(h5::open_group(file, base + "/config").id()), base + "/config",
                      problems);
    const Attrs attrs = h5::read_attrs(h5::open_group(file, base).id());
    const AttrValue* status = find_attr(attrs, "status");
    // A failed point has no summary, nor has one an incomplete sweep had not run yet.
    const bool failed = status != nullptr && (attr_to_string(*status).rfind("failed", 0) == 0 ||
                                              attr_to_string(*status) == "pending");
    const AttrValue* predicted = find_attr(attrs, "predicted");
    if (predicted_file && (predicted == nullptr || *predicted != AttrValue(int64_t{1})))
      problems.push_back(base + ": a point of a predicted file lacks predicted = 1");
    if (predicted != nullptr && *predicted == AttrValue(int64_t{1})) {
      // A predicted point measured nothing: its ops are in a prediction table, not a summary.
      if (h5::exists(file, base + "/summary"))
        problems.push_back(base + ": a predicted point holds a measured summary");
      if (!failed)
        check_section(problems, [&] {
          const std::string path = base + "/prediction";
          validate_fields(file,
                          {path.c_str(),
                           {"name", "kind", "ceiling", "interconnect_source"},
                           {},
                           {"instances", "compute_ns", "hbm_ns", "interconnect_ns", "launch_ns",
                            "efficiency", "time_ns"}},
                          problems);
        });
    } else if (!failed && require_object(file, base + "/summary", "group", problems)) {
      validate_summary(file, base, problems);
    }
    if (!h5::exists(file, base + "/ops")) continue;
    int64_t op_count = -1;
    check_section(problems, [&] { op_count = validate_ops(file, base + "/ops", problems); });
    for (int64_t r = 0; r < world_size; ++r) {
      const std::string group = base + "/ranks/" + std::to_string(r);
      if (unreadable.count(group + "/timeline") > 0) continue;
      check_section(problems, [&] {
        validate_timeline(file, group + "/timeline", op_count, recorded_rows(file, group),
                          problems);
      });
    }
  }
}

// An integer attribute `complete` that is 0 (a job killed before its end wrote the file).
bool marked_incomplete(const Attrs& attrs) {
  const AttrValue* complete = find_attr(attrs, "complete");
  return complete != nullptr && *complete == AttrValue(int64_t{0});
}

// Every repeat in /sweep/repeats, each ok point's medians inside their 95 % intervals (of
// finite, non-negative times), and each crossover's status one of kCrossoverStatuses.
void validate_sweep_repeats(hid_t file, const Attrs& attrs, std::vector<std::string>& problems) {
  require_attrs(attrs, "/sweep", {"interval"}, problems);
  for (const RoofTable& spec : kSweepRepeatTables)
    check_section(problems, [&] { validate_fields(file, spec, problems); });
  const h5::Table points = h5::read_table(file, "/sweep/points");
  const auto& status = column<std::string>(points, "status", "/sweep/points");
  const auto& repeats = column<int64_t>(points, "repeats", "/sweep/points");
  const bool complete = !marked_incomplete(attrs);
  for (size_t i = 0; i < status.size(); ++i) {
    if (status[i] == "ok" && repeats[i] < 1)
      problems.push_back("/sweep/points: row " + std::to_string(i) +
                         ": an ok point with no repeat");
    if (status[i] == "pending" && complete)
      problems.push_back("/sweep/points: row " + std::to_string(i) +
                         ": a point not run (pending) in a sweep marked complete");
  }
  const char* medians[] = {"step_p50", "compute", "hbm", "interconnect", "launch"};
  for (const char* m : medians) {
    const std::string base = m;
    const auto& mid = column<double>(points, (base + "_ns").c_str(), "/sweep/points");
    const auto& lo = column<double>(points, (base + "_lo_ns").c_str(), "/sweep/points");
    const auto& hi = column<double>(points, (base + "_hi_ns").c_str(), "/sweep/points");
    for (size_t i = 0; i < mid.size(); ++i) {
      if (status[i] != "ok") continue;
      if (!(lo[i] >= 0 && lo[i] <= mid[i] && mid[i] <= hi[i] && std::isfinite(hi[i])))
        problems.push_back("/sweep/points: row " + std::to_string(i) + ": " + base +
                           " must lie in its interval [lo, hi] of finite times >= 0, found " +
                           number_text(mid[i]) + " in [" + number_text(lo[i]) + ", " +
                           number_text(hi[i]) + "]");
    }
  }
  const h5::Table cross = h5::read_table(file, "/sweep/crossovers");
  if (row_count(cross) == 0) return;
  for (const std::string& s : column<std::string>(cross, "status", "/sweep/crossovers"))
    if (std::find(std::begin(kCrossoverStatuses), std::end(kCrossoverStatuses), s) ==
        std::end(kCrossoverStatuses))
      problems.push_back("/sweep/crossovers: unknown status '" + s + "'");
}

// Sweep files: the point and crossover tables, one /points group per row.
void validate_sweep(hid_t file, std::vector<std::string>& problems) {
  for (const RoofTable& spec : kSweepTables)
    check_section(problems, [&] { validate_fields(file, spec, problems); });
  if (!h5::exists(file, "/sweep/points")) return;
  const size_t rows = row_count(h5::read_table(file, "/sweep/points"));
  const size_t groups = h5::exists(file, "/points")
                            ? h5::list_children(h5::open_group(file, "/points").id()).size()
                            : 0;
  if (rows != groups)
    problems.push_back("/sweep/points: " + std::to_string(rows) + " rows but " +
                       std::to_string(groups) + " groups under /points");
  const Attrs attrs = h5::read_attrs(h5::open_group(file, "/sweep").id());
  require_attrs(attrs, "/sweep", {"axes", "points", "failed"}, problems);
  if (const AttrValue* axes = find_attr(attrs, "axes")) {
    const std::string* text = std::get_if<std::string>(axes);
    if (text == nullptr) problems.push_back("/sweep: axes must be a string");
    for (const std::string& axis : text ? split_by(*text, ',') : std::vector<std::string>{})
      if (!axis.empty() &&
          std::find_if(std::begin(kSweepAxes), std::end(kSweepAxes),
                       [&](const char* a) { return axis == a; }) == std::end(kSweepAxes))
        problems.push_back("/sweep: axes names '" + axis + "', which is not a sweep axis");
  }
  // Sweeps measured with repeats (the attribute `repeats`; earlier files measured once).
  if (find_attr(attrs, "repeats") != nullptr)
    check_section(problems, [&] { validate_sweep_repeats(file, attrs, problems); });
}

const char* const kIncomplete =
    "incomplete: the job ended before it finished (complete = 0); what it holds is "
    "valid but partial";

void validate_contents(hid_t file, const std::string& path, std::vector<std::string>& problems,
                       bool accept_incomplete) {
  Attrs root;
  check_section(problems, [&] { root = h5::read_attrs(file); });
  if (const AttrValue* master = find_attr(root, "part_of")) {
    problems.push_back("/: a node file of the per-node layout, part of '" +
                       attr_to_string(*master) + "': validate that file, which links this one");
    return;
  }
  require_attrs(root, "/", {std::begin(kRootAttrs), std::end(kRootAttrs)}, problems);
  if (const AttrValue* value = find_attr(root, "schema_version")) {
    const auto* version = std::get_if<int64_t>(value);
    // Another major version may lay the file out differently: nothing else can be checked.
    if (version == nullptr) {
      problems.push_back("/: schema_version is not an integer");
      return;
    }
    if (*version != kSchemaVersion) {
      problems.push_back(version_problem(*version));
      return;
    }
  }
  int64_t world_size = -1;
  if (const AttrValue* value = find_attr(root, "world_size")) {
    const auto* size = std::get_if<int64_t>(value);
    if (size != nullptr && *size >= 1)
      world_size = *size;
    else
      problems.push_back("/: world_size must be an integer >= 1");
  }

  // A world_size the file does not hold (a damaged attribute) would have the checks below loop
  // over ranks that are not there: it is held against /topology's length first.
  if (world_size > 0)
    check_section(problems, [&] {
      const std::optional<size_t> held = ranks_held(file);
      if (!held || *held == static_cast<size_t>(world_size)) return;
      problems.push_back("/: world_size " + std::to_string(world_size) + " but /topology holds " +
                         std::to_string(*held) + " ranks");
      world_size = -1;
    });

  const bool collectives = is_collectives_file(root);
  const bool roofs_file = is_command(root, "roofs");
  const bool sweep_file = is_command(root, "sweep");
  const AttrValue* predicted_attr = find_attr(root, "predicted");
  const bool predicted_file = predicted_attr != nullptr && *predicted_attr == AttrValue(int64_t{1});
  if (collectives) require_attrs(root, "/", {"check"}, problems);
  // `complete` is 0 or 1 where present (root, /sweep).
  auto check_complete = [&](const Attrs& attrs, const char* where) {
    const AttrValue* complete = find_attr(attrs, "complete");
    if (complete != nullptr && *complete != AttrValue(int64_t{0}) &&
        *complete != AttrValue(int64_t{1}))
      problems.push_back(std::string(where) + ": complete is " + attr_to_string(*complete) +
                         ", expected the integer 0 or 1");
  };
  check_complete(root, "/");
  if (!accept_incomplete && marked_incomplete(root))
    problems.push_back(std::string("/: ") + kIncomplete);
  if (sweep_file && h5::exists(file, "/sweep"))
    check_section(problems, [&] {
      const Attrs sweep = h5::read_attrs(h5::open_group(file, "/sweep").id());
      check_complete(sweep, "/sweep");
      if (!accept_incomplete && marked_incomplete(sweep))
        problems.push_back(std::string("/sweep: ") + kIncomplete);
    });
  std::vector<const char*> groups(std::begin(kGroups), std::end(kGroups));
  if (collectives) groups.assign(std::begin(kCollectivesGroups), std::end(kCollectivesGroups));
  if (roofs_file) groups = {"/stack", "/config", "/topology", "/roofs"};
  if (sweep_file) groups = {"/stack", "/config", "/topology", "/sweep", "/points"};
  std::set<std::string> present;
  for (const char* group : groups)
    check_section(problems, [&] {
      if (require_object(file, group, "group", problems)) present.insert(group);
    });
  auto has = [&](const char* group) { return present.count(group) > 0; };
  if (has("/stack")) check_section(problems, [&] { validate_stack(file, problems); });
  if (has("/config"))
    check_section(problems, [&] {
      validate_config(h5::read_attrs(h5::open_group(file, "/config").id()), "/config", problems);
    });
  if (has("/topology"))
    check_section(problems, [&] { validate_topology(file, world_size, problems); });
  std::set<std::string> unreadable;
  const AttrValue* layout = find_attr(root, "file_layout");
  if (layout != nullptr && attr_to_string(*layout) == kPerNodeLayout)
    check_section(problems, [&] { unreadable = validate_links(file, path, root, problems); });
  if (has("/topology") && has("/config"))
    check_section(problems, [&] { validate_gpu_map(file, problems); });
  int64_t op_count = -1;
  if (has("/ops"))
    check_section(problems, [&] { op_count = validate_ops(file, "/ops", problems); });
  if (has("/ranks"))
    check_section(problems,
                  [&] { validate_ranks(file, world_size, op_count, unreadable, problems); });
  if (has("/summary")) validate_summary(file, "", problems);
  if (h5::exists(file, "/points"))
    check_section(problems,
                  [&] { validate_points(file, world_size, unreadable, predicted_file, problems); });
  if (has("/sweep")) check_section(problems, [&] { validate_sweep(file, problems); });
  if (collectives) {
    if (has("/collectives")) check_section(problems, [&] { validate_collectives(file, problems); });
    if (has("/roofs")) check_section(problems, [&] { validate_roof(file, problems, false); });
  } else if (h5::exists(file, "/roofs")) {
    check_section(problems, [&] { validate_roofs(file, problems); });
  }
}

} // namespace

void write_run_file(const std::string& path, const RunData& data) {
  const bool run_layout = has_run_layout(data.root);
  check_run_data(path, data, run_layout ? data.timelines.size() : data.topology.size());
  TemporaryFile temporary(temporary_name(path));
  RanksPart ranks;
  ranks.has = [&](const std::string& prefix) {
    if (prefix.empty()) return run_layout;
    return !data.points.at(std::stoul(prefix.substr(prefix.rfind('/') + 1))).timelines.empty();
  };
  ranks.write = [&](hid_t parent, const std::string& prefix) {
    write_ranks(parent,
                prefix.empty()
                    ? data.timelines
                    : data.points.at(std::stoul(prefix.substr(prefix.rfind('/') + 1))).timelines);
  };
  try {
    write_run_contents(temporary.path(), data, ranks, {});
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  temporary.rename_to(path);
}

std::vector<RunData::Point> read_points(const std::string& path) {
  if (const std::string problem = open_problem(path); !problem.empty()) throw UsageError(problem);
  std::vector<RunData::Point> points;
  try {
    h5::Handle file = h5::open_file_read(path);
    if (!h5::exists(file.id(), "/points")) return points;
    const std::vector<std::string> names =
        h5::list_children(h5::open_group(file.id(), "/points").id());
    for (size_t k = 0; k < names.size(); ++k) {
      const std::string base = "/points/" + std::to_string(k);
      RunData::Point p;
      p.attrs = h5::read_attrs(h5::open_group(file.id(), base).id());
      p.config = h5::read_attrs(h5::open_group(file.id(), base + "/config").id());
      p.has_summary = h5::exists(file.id(), base + "/summary");
      if (p.has_summary) p.summary = read_summary(file.id(), base);
      points.push_back(std::move(p));
    }
  } catch (const Error& e) {
    throw UsageError(path + ": " + e.what());
  }
  return points;
}

RunData read_run_file(const std::string& path, bool timelines) {
  if (const std::string problem = open_problem(path); !problem.empty()) throw UsageError(problem);
  try {
    return read_contents(path, timelines);
  } catch (const Error& e) {
    throw UsageError(path + ": " + e.what());
  }
}

std::vector<std::string> validate_run_file(const std::string& path, bool accept_incomplete) {
  if (std::string problem = open_problem(path); !problem.empty()) return {problem};
  std::vector<std::string> problems;
  try {
    h5::Handle file = h5::open_file_read(path);
    validate_contents(file.id(), path, problems, accept_incomplete);
  } catch (const std::exception& e) {
    problems.push_back(e.what()); // the caller names the file
  }
  return problems;
}

std::string incomplete_note(const RunData& data) {
  if (marked_incomplete(data.root)) {
    std::vector<std::string> names;
    size_t sizes = 0;
    for (const NamedTable& t : data.tables)
      if (t.path.rfind("/collectives/", 0) == 0 && !ends_with(t.path, kSamplesSuffix)) {
        names.push_back(t.path.substr(std::strlen("/collectives/")));
        sizes += row_count(t.table);
      }
    std::string list;
    for (const std::string& n : names)
      list += (list.empty() ? "" : ", ") + n;
    return "incomplete: the job ended before it finished; it holds " + std::to_string(sizes) +
           " size(s) of " + (list.empty() ? std::string("no collective") : list) +
           "; the sizes after them were not measured";
  }
  for (const auto& [group, attrs] : data.group_attrs)
    if (group == "/sweep" && marked_incomplete(attrs)) {
      const AttrValue* points = find_attr(attrs, "points");
      return "incomplete: the job ended before it finished; it holds the first " +
             (points ? attr_to_string(*points) : std::string("?")) + " point(s) of the grid";
    }
  return "";
}

void add_roofs(RunData& data, const Roofs& roofs, const Attrs& extra) {
  Table gemm, memory, launch;
  {
    std::vector<std::string> dtype, label;
    std::vector<int64_t> m, n, k, reps;
    std::vector<double> best, p50, tflops, mhz;
    for (const GemmRoof& g : roofs.gemm) {
      dtype.push_back(g.dtype), label.push_back(g.label), m.push_back(g.m), n.push_back(g.n),
          k.push_back(g.k);
      reps.push_back(g.reps), best.push_back(g.best_ns), p50.push_back(g.p50_ns),
          tflops.push_back(g.tflops);
      mhz.push_back(g.sm_clock_mhz);
    }
    gemm = {{"dtype", dtype},   {"label", label},     {"m", m},          {"n", n},
            {"k", k},           {"reps", reps},       {"best_ns", best}, {"p50_ns", p50},
            {"tflops", tflops}, {"sm_clock_mhz", mhz}};
  }
  {
    std::vector<std::string> kind;
    std::vector<int64_t> bytes, reps;
    std::vector<double> best, p50, gbps, mhz;
    for (const MemoryRoof& r : roofs.memory) {
      kind.push_back(r.kind), bytes.push_back(r.bytes), reps.push_back(r.reps),
          best.push_back(r.best_ns);
      p50.push_back(r.p50_ns), gbps.push_back(r.gbps), mhz.push_back(r.sm_clock_mhz);
    }
    memory = {{"kind", kind},  {"bytes", bytes}, {"reps", reps},       {"best_ns", best},
              {"p50_ns", p50}, {"gbps", gbps},   {"sm_clock_mhz", mhz}};
  }
  {
    std::vector<std::string> kind;
    std::vector<int64_t> launches;
    std::vector<double> ns, mhz;
    for (const LaunchRoof& r : roofs.launch)
      kind.push_back(r.kind), launches.push_back(r.launches), ns.push_back(r.ns_per_launch),
          mhz.push_back(r.sm_clock_mhz);
    launch = {{"kind", kind}, {"launches", launches}, {"ns_per_launch", ns}, {"sm_clock_mhz", mhz}};
  }
  std::vector<std::string> names, dtypes, transports;
  std::vector<int64_t> groups, fit_min, fit_max;
  std::vector<double> alpha, beta, floor_alpha, floor_beta;
  for (const InterconnectRoof& r : roofs.interconnect) {
    names.push_back(r.collective), groups.push_back(r.group_size), dtypes.push_back(r.dtype);
    transports.push_back(r.transport), alpha.push_back(r.alpha_us), beta.push_back(r.beta_gbps);
    floor_alpha.push_back(r.floor_alpha_us), floor_beta.push_back(r.floor_beta_gbps);
    fit_min.push_back(r.fit_min_bytes), fit_max.push_back(r.fit_max_bytes);
  }
  data.tables.push_back(
      {"/roofs/gemm",
       gemm,
       {{"method",
         std::string("cuBLASLt (host: OpenBLAS) GEMMs c = a w^T, fp32 accumulation, square sizes "
                     "and the layer's shapes; best and median of back-to-back calls")}}});
  data.tables.push_back(
      {"/roofs/memory",
       memory,
       {{"method",
         std::string(
             "the project's vectorised read, write and copy kernels over buffers from cache-sized "
             "to far beyond the last-level cache; copy bytes count read + write")}}});
  data.tables.push_back(
      {"/roofs/launch",
       launch,
       {{"method", std::string("empty kernels launched back to back from the host (eager), and "
                               "replayed from one captured graph (graph_node)")}}});
  data.tables.push_back(
      {"/roofs/interconnect",
       {{"collective", names},
        {"group_size", groups},
        {"dtype", dtypes},
        {"transport", transports},
        {"alpha_us", alpha},
        {"beta_gbps", beta},
        {"floor_alpha_us", floor_alpha},
        {"floor_beta_gbps", floor_beta},
        {"fit_min_bytes", fit_min},
        {"fit_max_bytes", fit_max}},
       {{"method",
         std::string("a short nccl-tests-style sweep per collective and group size (groups of "
                     "consecutive ranks, run concurrently); alpha/beta: least squares on the "
                     "medians; floor_*: the lower envelope of the fastest calls")}}});
  Attrs attrs = {{"backend", roofs.backend}, {"source", roofs.source}};
  for (DType d : {DType::bf16, DType::f16, DType::f32})
    if (roofs.peak_tflops(d) > 0)
      attrs.emplace_back(std::string("gemm_peak_tflops.") + dtype_name(d), roofs.peak_tflops(d));
  for (const char* kind : {"read", "write", "copy"}) {
    double gbps = 0;
    int64_t largest = -1;
    for (const MemoryRoof& r : roofs.memory)
      if (r.kind == kind && r.bytes > largest) largest = r.bytes, gbps = r.gbps;
    if (largest > 0) attrs.emplace_back(std::string("hbm_") + kind + "_gbps", gbps);
  }
  for (const LaunchRoof& r : roofs.launch)
    attrs.emplace_back("launch_" + r.kind + "_ns", r.ns_per_launch);
  attrs.insert(attrs.end(), extra.begin(), extra.end());
  data.group_attrs.emplace_back("/roofs", attrs);
}

Roofs read_roofs(const std::string& path) {
  if (const std::string problem = open_problem(path); !problem.empty()) throw UsageError(problem);
  try {
    h5::Handle file = h5::open_file_read(path);
    if (!h5::exists(file.id(), "/roofs/gemm"))
      throw UsageError(
          path +
          ": no /roofs (measure them into a file of their own with `ridgeline roofs --out FILE`)");
    Roofs roofs;
    const Attrs attrs = h5::read_attrs(h5::open_group(file.id(), "/roofs").id());
    const Attrs root = h5::read_attrs(file.id());
    if (const AttrValue* b = find_attr(attrs, "backend")) roofs.backend = attr_to_string(*b);
    const AttrValue* created = find_attr(root, "created_utc");
    roofs.source = path + (created ? " (" + attr_to_string(*created) + ")" : std::string());
    const h5::Table g = h5::read_table(file.id(), "/roofs/gemm");
    for (size_t i = 0; i < row_count(g); ++i)
      roofs.gemm.push_back(
          {column<std::string>(g, "dtype", path)[i], column<std::string>(g, "label", path)[i],
           column<int64_t>(g, "m", path)[i], column<int64_t>(g, "n", path)[i],
           column<int64_t>(g, "k", path)[i], column<int64_t>(g, "reps", path)[i],
           column<double>(g, "best_ns", path)[i], column<double>(g, "p50_ns", path)[i],
           column<double>(g, "tflops", path)[i], column<double>(g, "sm_clock_mhz", path)[i]});
    const h5::Table m = h5::read_table(file.id(), "/roofs/memory");
    for (size_t i = 0; i < row_count(m); ++i)
      roofs.memory.push_back(
          {column<std::string>(m, "kind", path)[i], column<int64_t>(m, "bytes", path)[i],
           column<int64_t>(m, "reps", path)[i], column<double>(m, "best_ns", path)[i],
           column<double>(m, "p50_ns", path)[i], column<double>(m, "gbps", path)[i],
           column<double>(m, "sm_clock_mhz", path)[i]});
    const h5::Table l = h5::read_table(file.id(), "/roofs/launch");
    for (size_t i = 0; i < row_count(l); ++i)
      roofs.launch.push_back({column<std::string>(l, "kind", path)[i],
                              column<int64_t>(l, "launches", path)[i],
                              column<double>(l, "ns_per_launch", path)[i],
                              column<double>(l, "sm_clock_mhz", path)[i]});
    const h5::Table c = h5::read_table(file.id(), kRoofPath);
    for (size_t i = 0; i < row_count(c); ++i)
      roofs.interconnect.push_back(
          {column<std::string>(c, "collective", path)[i], column<int64_t>(c, "group_size", path)[i],
           column<std::string>(c, "dtype", path)[i], column<std::string>(c, "transport", path)[i],
           column<double>(c, "alpha_us", path)[i], column<double>(c, "beta_gbps", path)[i],
           column<double>(c, "floor_alpha_us", path)[i],
           column<double>(c, "floor_beta_gbps", path)[i],
           column<int64_t>(c, "fit_min_bytes", path)[i],
           column<int64_t>(c, "fit_max_bytes", path)[i]});
    return roofs;
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(path + ": " + e.what());
  }
}

Table aggregates_table(const std::vector<OpAggregate>& ops) {
  Table table;
  for (const TextField& field : kAggregateText) {
    std::vector<std::string> values;
    for (const OpAggregate& op : ops)
      values.push_back(op.*field.member);
    table.push_back({field.name, std::move(values)});
  }
  std::vector<int64_t> counts;
  for (const OpAggregate& op : ops)
    counts.push_back(op.count);
  table.push_back({"count", std::move(counts)});
  for (const NumberField& field : kAggregateNumbers) {
    std::vector<double> values;
    for (const OpAggregate& op : ops)
      values.push_back(op.*field.member);
    table.push_back({field.name, std::move(values)});
  }
  return table;
}

std::string hdf5_library_version() {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned release = 0;
  h5::check_status(H5get_libversion(&major, &minor, &release), "H5get_libversion", "library");
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

std::string hdf5_build() {
  return h5::parallel_library() ? "parallel" : "serial";
}

} // namespace ridgeline
