// The run file's writer (see run_file.hpp and run_file_write.hpp).
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
#include "app/run_file_write.hpp"
#include "app/summary.hpp"
#include "app/sweep.hpp"
#include "core/checksum.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "models/layer_plan.hpp"

namespace ridgeline {

using namespace run_file_detail;

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
  // A run across nodes: each node's figures, and the nodes that stand out named.
  if (!summary.nodes.empty()) {
    h5::write_table(group.id(), "nodes", nodes_table(summary.nodes), false);
    if (find_attr(summary.attrs, "slow_nodes") == nullptr)
      h5::write_attr(group.id(), "slow_nodes", slow_nodes(summary.nodes));
  }
  if (!summary.moe_rank_imbalance.empty())
    h5::write_dataset(group.id(), "moe_rank_imbalance_per_step", summary.moe_rank_imbalance);
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

namespace {

// /roofs/gemm, /roofs/memory and /roofs/launch: the probes' rows.
void add_probe_tables(RunData& data, const Roofs& roofs) {
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
}

// /roofs/interconnect: the fits per collective, group size and scope.
void add_interconnect_table(RunData& data, const Roofs& roofs) {
  std::vector<std::string> names, dtypes, transports, scopes;
  std::vector<int64_t> groups, fit_min, fit_max, group_nodes;
  std::vector<double> alpha, beta, floor_alpha, floor_beta;
  for (const InterconnectRoof& r : roofs.interconnect) {
    names.push_back(r.collective), groups.push_back(r.group_size), dtypes.push_back(r.dtype);
    transports.push_back(r.transport), alpha.push_back(r.alpha_us), beta.push_back(r.beta_gbps);
    floor_alpha.push_back(r.floor_alpha_us), floor_beta.push_back(r.floor_beta_gbps);
    fit_min.push_back(r.fit_min_bytes), fit_max.push_back(r.fit_max_bytes);
    scopes.emplace_back(scope_name(r.scope)), group_nodes.push_back(r.group_nodes);
  }
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
        {"fit_max_bytes", fit_max},
        {"scope", scopes},
        {"group_nodes", group_nodes}},
       {{"method",
         std::string("a short nccl-tests-style sweep per collective, group size and scope (the "
                     "groups of one layout run concurrently: within each node, one rank per node, "
                     "every rank of several nodes); alpha/beta: least squares on the medians; "
                     "floor_*: the lower envelope of the fastest calls")}}});
}

// /roofs/gpus: each rank's own figures, where the roofs hold them.
void add_gpus_table(RunData& data, const Roofs& roofs) {
  if (roofs.gpus.empty()) return;
  std::vector<int64_t> rank, device;
  std::vector<std::string> node, outlier;
  std::vector<double> tflops, read, launch_ns, node_link, inter_node;
  for (const GpuRoof& g : roofs.gpus) {
    rank.push_back(g.rank), node.push_back(g.node), device.push_back(g.device);
    tflops.push_back(g.gemm_tflops), read.push_back(g.read_gbps), launch_ns.push_back(g.launch_ns),
        outlier.push_back(g.outlier);
    node_link.push_back(g.node_busbw_gbps), inter_node.push_back(g.inter_node_gbps);
  }
  data.tables.push_back(
      {"/roofs/gpus",
       {{"rank", rank},
        {"node", node},
        {"device", device},
        {"gemm_tflops", tflops},
        {"read_gbps", read},
        {"launch_ns", launch_ns},
        {"node_busbw_gbps", node_link},
        {"inter_node_gbps", inter_node},
        {"outlier", outlier}},
       {{"method", std::string("each rank's own best of the probes every rank ran at once, "
                               "before the best over ranks that the roofs keep")}}});
}

} // namespace

void add_roofs(RunData& data, const Roofs& roofs, const Attrs& extra) {
  add_probe_tables(data, roofs);
  add_interconnect_table(data, roofs);
  add_gpus_table(data, roofs);
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
