// The run file's reader (see run_file.hpp).
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
#include "app/node_summary.hpp"
#include "app/run_file_schema.hpp"
#include "app/summary.hpp"
#include "app/sweep.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "models/layer_plan.hpp"

namespace ridgeline {

namespace run_file_detail {

std::vector<OpAggregate> read_aggregates(hid_t file, const std::string& where) {
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

} // namespace run_file_detail

using namespace run_file_detail;

namespace {

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
  if (h5::exists(group.id(), "moe_rank_imbalance_per_step"))
    summary.moe_rank_imbalance = h5::read_vector<double>(group.id(), "moe_rank_imbalance_per_step");
  Attrs attrs = h5::read_attrs(group.id());
  summary.step.count = static_cast<size_t>(int_attr(attrs, "count", where));
  for (const StepField& field : kStepFields)
    summary.step.*field.member = number_attr(attrs, field.name, where);
  summary.warmup_to_steady = int_attr(attrs, "warmup_to_steady", where);
  for (auto& entry : attrs)
    if (!is_step_attr(entry.first)) summary.attrs.push_back(std::move(entry));
  summary.ops = read_aggregates(file, where + "/ops");
  if (h5::exists(group.id(), "nodes"))
    summary.nodes = nodes_from_table(h5::read_table(group.id(), "nodes"));
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

} // namespace

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
    // Files written before scopes measured within a node only.
    const bool scoped = h5::find_column(c, "scope") != nullptr;
    const bool spans = h5::find_column(c, "group_nodes") != nullptr;
    for (size_t i = 0; i < row_count(c); ++i) {
      roofs.interconnect.push_back(
          {column<std::string>(c, "collective", path)[i], column<int64_t>(c, "group_size", path)[i],
           column<std::string>(c, "dtype", path)[i], column<std::string>(c, "transport", path)[i],
           column<double>(c, "alpha_us", path)[i], column<double>(c, "beta_gbps", path)[i],
           column<double>(c, "floor_alpha_us", path)[i],
           column<double>(c, "floor_beta_gbps", path)[i],
           column<int64_t>(c, "fit_min_bytes", path)[i],
           column<int64_t>(c, "fit_max_bytes", path)[i]});
      InterconnectRoof& roof = roofs.interconnect.back();
      if (scoped && !parse_scope(column<std::string>(c, "scope", path)[i], roof.scope))
        throw UsageError(path + ": /roofs/interconnect row " + std::to_string(i) + " has scope '" +
                         column<std::string>(c, "scope", path)[i] +
                         "' (expected intra, inter or hier)");
      if (spans) roof.group_nodes = column<int64_t>(c, "group_nodes", path)[i];
    }
    return roofs;
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(path + ": " + e.what());
  }
}

} // namespace ridgeline
