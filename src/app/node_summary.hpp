// The nodes of a run across nodes side by side: each node's compute time and span per step,
// and the node whose compute stands out from the others' (a slow node holds every collective
// of the job back, so the step alone cannot name it).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "app/run_data.hpp"
#include "parallel/grid.hpp"

namespace ridgeline {

/// One rank's own series over its timed iterations [0, iterations): the compute-lane time (the
/// sum of its compute-lane ops' durations) and the span (first op start to last op end); -1
/// for an iteration the rank has no row of.
struct RankSeries {
  std::vector<double> compute_ns, span_ns;
};
RankSeries rank_series(const std::vector<TimelineRecord>& mine, size_t iterations);

/// Each node's figures from its series (per node, per timed iteration: the longest of its
/// ranks'; -1 entries are left out): medians with their 95 % intervals (repeated_median), and
/// `slow` where a node's compute interval lies above the interval of the other nodes' series
/// taken together (each node a repeat). Pure: no MPI.
std::vector<NodeFigures> node_figures(const std::vector<std::string>& names,
                                      const std::vector<int64_t>& ranks,
                                      const std::vector<RankSeries>& per_node);

/// Every rank of `world` calls with its own timeline: each node's series reduced over its ranks
/// (a node's communicator), gathered from the nodes' first ranks to rank 0, which gets the
/// figures; every other rank, and a job on one node, gets none. Collective over `world`.
std::vector<NodeFigures> summarize_nodes(MPI_Comm world, const NodeMap& nodes,
                                         const std::vector<std::string>& hosts,
                                         const std::vector<TimelineRecord>& mine);

/// The figures as the /summary/nodes table.
Table nodes_table(const std::vector<NodeFigures>& nodes);
/// The figures read back from that table.
std::vector<NodeFigures> nodes_from_table(const Table& table);
/// The slow nodes' names, comma-separated ("" when none): /summary `slow_nodes`.
std::string slow_nodes(const std::vector<NodeFigures>& nodes);

} // namespace ridgeline
