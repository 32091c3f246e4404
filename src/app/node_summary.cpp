// The nodes of a run across nodes side by side (see node_summary.hpp).
#include "app/node_summary.hpp"

#include <algorithm>
#include <climits>

#include "core/error.hpp"

namespace ridgeline {
namespace {

// The entries of `v` that some rank had (>= 0).
std::vector<double> held(const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v)
    if (x >= 0) out.push_back(x);
  return out;
}

// A column of `table` of type T, or Error naming it.
template <class T> const std::vector<T>& column_of(const Table& table, const char* name) {
  for (const Column& c : table)
    if (c.name == name)
      if (const auto* v = std::get_if<std::vector<T>>(&c.values)) return *v;
  throw Error(std::string("/summary/nodes: no field ") + name + " of the expected type");
}

} // namespace

RankSeries rank_series(const std::vector<TimelineRecord>& mine, size_t iterations) {
  RankSeries s;
  s.compute_ns.assign(iterations, -1);
  s.span_ns.assign(iterations, -1);
  std::vector<int64_t> first(iterations, INT64_MAX), last(iterations, INT64_MIN);
  for (const TimelineRecord& r : mine) {
    if (r.warmup || r.iteration < 0 || static_cast<size_t>(r.iteration) >= iterations) continue;
    const size_t i = static_cast<size_t>(r.iteration);
    first[i] = std::min(first[i], r.t_start_ns);
    last[i] = std::max(last[i], r.t_end_ns);
    if (r.lane == static_cast<uint8_t>(Lane::compute))
      s.compute_ns[i] =
          std::max(0.0, s.compute_ns[i]) + static_cast<double>(r.t_end_ns - r.t_start_ns);
  }
  for (size_t i = 0; i < iterations; ++i)
    if (first[i] != INT64_MAX) {
      s.span_ns[i] = static_cast<double>(last[i] - first[i]);
      s.compute_ns[i] = std::max(0.0, s.compute_ns[i]);
    }
  return s;
}

std::vector<NodeFigures> node_figures(const std::vector<std::string>& names,
                                      const std::vector<int64_t>& ranks,
                                      const std::vector<RankSeries>& per_node) {
  std::vector<NodeFigures> out;
  for (size_t n = 0; n < per_node.size(); ++n) {
    NodeFigures f;
    f.node = names.at(n);
    f.ranks = ranks.at(n);
    f.compute = repeated_median({held(per_node[n].compute_ns)});
    f.span = repeated_median({held(per_node[n].span_ns)});
    out.push_back(f);
  }
  if (per_node.size() < 2) return out;
  for (size_t n = 0; n < per_node.size(); ++n) {
    std::vector<std::vector<double>> others;
    for (size_t m = 0; m < per_node.size(); ++m)
      if (m != n) others.push_back(held(per_node[m].compute_ns));
    const Interval rest = repeated_median(others);
    const std::vector<double> mine = held(per_node[n].compute_ns);
    out[n].slow = !mine.empty() && out[n].compute.lo > rest.hi;
  }
  return out;
}

std::vector<NodeFigures> summarize_nodes(MPI_Comm world, const NodeMap& nodes,
                                         const std::vector<std::string>& hosts,
                                         const std::vector<TimelineRecord>& mine) {
  if (nodes.nodes < 2) return {};
  int rank = 0;
  RIDGELINE_CHECK(MPI_Comm_rank(world, &rank));
  int64_t iterations = 0;
  for (const TimelineRecord& r : mine)
    if (!r.warmup) iterations = std::max<int64_t>(iterations, r.iteration + 1);
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &iterations, 1, MPI_INT64_T, MPI_MAX, world));
  const size_t I = static_cast<size_t>(iterations);
  // This rank's series, then its node's: the longest of the node's ranks per iteration.
  const RankSeries own = rank_series(mine, I);
  std::vector<double> series(own.compute_ns);
  series.insert(series.end(), own.span_ns.begin(), own.span_ns.end());
  const int node = nodes.node_of_rank.at(static_cast<size_t>(rank));
  MPI_Comm node_comm = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  RIDGELINE_CHECK(MPI_Comm_split(world, node, rank, &node_comm));
  int node_rank = 0;
  RIDGELINE_CHECK(MPI_Comm_rank(node_comm, &node_rank));
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, series.data(), static_cast<int>(series.size()),
                                MPI_DOUBLE, MPI_MAX, node_comm));
  // The nodes' first ranks, in world order: world rank 0 is the first of them.
  RIDGELINE_CHECK(MPI_Comm_split(world, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders));
  std::vector<double> all(rank == 0 ? series.size() * static_cast<size_t>(nodes.nodes) : 0);
  if (leaders != MPI_COMM_NULL)
    RIDGELINE_CHECK(MPI_Gather(series.data(), static_cast<int>(series.size()), MPI_DOUBLE,
                               all.data(), static_cast<int>(series.size()), MPI_DOUBLE, 0,
                               leaders));
  if (leaders != MPI_COMM_NULL) RIDGELINE_CHECK(MPI_Comm_free(&leaders));
  RIDGELINE_CHECK(MPI_Comm_free(&node_comm));
  if (rank != 0) return {};
  // Leaders are gathered in world order, and nodes are numbered by their first rank: node n's
  // series is the n-th.
  std::vector<std::string> names(static_cast<size_t>(nodes.nodes));
  std::vector<int64_t> counts(static_cast<size_t>(nodes.nodes), 0);
  for (size_t r = 0; r < nodes.node_of_rank.size(); ++r) {
    const size_t n = static_cast<size_t>(nodes.node_of_rank[r]);
    if (counts[n]++ == 0) names[n] = hosts.at(r);
  }
  std::vector<RankSeries> per_node(static_cast<size_t>(nodes.nodes));
  for (size_t n = 0; n < per_node.size(); ++n) {
    const auto at = all.begin() + static_cast<std::ptrdiff_t>(n * 2 * I);
    per_node[n].compute_ns.assign(at, at + static_cast<std::ptrdiff_t>(I));
    per_node[n].span_ns.assign(at + static_cast<std::ptrdiff_t>(I),
                               at + static_cast<std::ptrdiff_t>(2 * I));
  }
  return node_figures(names, counts, per_node);
}

Table nodes_table(const std::vector<NodeFigures>& nodes) {
  std::vector<std::string> name;
  std::vector<int64_t> ranks, slow;
  std::vector<double> c50, clo, chi, s50, slo, shi;
  for (const NodeFigures& f : nodes) {
    name.push_back(f.node), ranks.push_back(f.ranks), slow.push_back(f.slow ? 1 : 0);
    c50.push_back(f.compute.median), clo.push_back(f.compute.lo), chi.push_back(f.compute.hi);
    s50.push_back(f.span.median), slo.push_back(f.span.lo), shi.push_back(f.span.hi);
  }
  return {{"node", name},         {"ranks", ranks},       {"compute_p50_ns", c50},
          {"compute_lo_ns", clo}, {"compute_hi_ns", chi}, {"span_p50_ns", s50},
          {"span_lo_ns", slo},    {"span_hi_ns", shi},    {"slow", slow}};
}

std::vector<NodeFigures> nodes_from_table(const Table& table) {
  const auto& name = column_of<std::string>(table, "node");
  std::vector<NodeFigures> out(name.size());
  for (size_t i = 0; i < out.size(); ++i) {
    NodeFigures& f = out[i];
    f.node = name[i];
    f.ranks = column_of<int64_t>(table, "ranks")[i];
    f.slow = column_of<int64_t>(table, "slow")[i] != 0;
    f.compute = {column_of<double>(table, "compute_p50_ns")[i],
                 column_of<double>(table, "compute_lo_ns")[i],
                 column_of<double>(table, "compute_hi_ns")[i]};
    f.span = {column_of<double>(table, "span_p50_ns")[i], column_of<double>(table, "span_lo_ns")[i],
              column_of<double>(table, "span_hi_ns")[i]};
  }
  return out;
}

std::string slow_nodes(const std::vector<NodeFigures>& nodes) {
  std::string out;
  for (const NodeFigures& f : nodes)
    if (f.slow) out += (out.empty() ? "" : ",") + f.node;
  return out;
}

} // namespace ridgeline
