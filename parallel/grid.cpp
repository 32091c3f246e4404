// Process grid construction with MPI_Comm_split, and where its groups fall on the nodes.
#include "parallel/grid.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace ridgeline {

GridCoords grid_coords(int world_rank, int tp, int pp) {
  GridCoords c;
  c.tp_rank = world_rank % tp;
  c.pp_rank = (world_rank / tp) % pp;
  c.dp_rank = world_rank / (tp * pp);
  return c;
}

int grid_rank(const GridCoords& c, int tp, int pp) {
  return (c.dp_rank * pp + c.pp_rank) * tp + c.tp_rank;
}

NodeMap map_nodes(const std::vector<std::string>& hosts) {
  NodeMap m;
  std::map<std::string, int> index;
  std::vector<int> count;
  for (const std::string& h : hosts) {
    const auto [it, fresh] = index.emplace(h, static_cast<int>(count.size()));
    if (fresh) count.push_back(0);
    ++count[static_cast<size_t>(it->second)];
    m.node_of_rank.push_back(it->second);
  }
  m.nodes = static_cast<int>(count.size());
  m.ranks_per_node = count.empty() ? 0 : count.front();
  for (int c : count)
    if (c != m.ranks_per_node) m.ranks_per_node = 0;
  return m;
}

std::string tp_span_problem(const std::vector<std::string>& hosts, int tp) {
  if (tp <= 1) return "";
  const size_t n = static_cast<size_t>(tp);
  for (size_t g = 0; g < hosts.size(); g += n)
    for (size_t r = g + 1; r < std::min(g + n, hosts.size()); ++r)
      if (hosts[r] != hosts[g])
        return "the TP group of world ranks " + std::to_string(g) + ".." +
               std::to_string(std::min(g + n, hosts.size()) - 1) + " spans nodes (rank " +
               std::to_string(g) + " on " + hosts[g] + ", rank " + std::to_string(r) + " on " +
               hosts[r] + ")";
  return "";
}

ProcessGrid::ProcessGrid(MPI_Comm world, int tp, int pp, int dp)
    : m_tp(tp), m_pp(pp), m_dp(dp), m_world(world) {
  int rank = 0, size = 0;
  RIDGELINE_CHECK(MPI_Comm_rank(world, &rank));
  RIDGELINE_CHECK(MPI_Comm_size(world, &size));
  if (tp * pp * dp != size)
    throw UsageError("tp * pp * dp = " + std::to_string(tp * pp * dp) + " but " +
                     std::to_string(size) + " ranks are running");
  m_coords = grid_coords(rank, tp, pp);
  const GridCoords& c = m_coords;
  RIDGELINE_CHECK(MPI_Comm_split(world, c.dp_rank * pp + c.pp_rank, c.tp_rank, &m_tp_comm));
  RIDGELINE_CHECK(MPI_Comm_split(world, c.dp_rank * tp + c.tp_rank, c.pp_rank, &m_pp_comm));
  RIDGELINE_CHECK(MPI_Comm_split(world, c.pp_rank * tp + c.tp_rank, c.dp_rank, &m_dp_comm));
}

ProcessGrid::~ProcessGrid() {
  for (MPI_Comm* c : {&m_tp_comm, &m_pp_comm, &m_dp_comm})
    if (*c != MPI_COMM_NULL) RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(c));
}

} // namespace ridgeline
