// Process grid construction with MPI_Comm_split, and where its groups fall on the nodes.
#include "parallel/grid.hpp"

#include <algorithm>
#include <map>
#include <numeric>

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

int stage_place(const GridCoords& c, int tp) {
  return c.dp_rank * tp + c.tp_rank;
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

Scope group_scope(const NodeMap& nodes, const std::vector<int>& ranks) {
  std::map<int, int> per_node;
  for (int r : ranks)
    ++per_node[nodes.node_of_rank.at(static_cast<size_t>(r))];
  if (per_node.size() <= 1) return Scope::intra;
  for (const auto& [node, count] : per_node)
    if (count > 1) return Scope::hier;
  return Scope::inter;
}

namespace {

// The widest scope of the groups that `key` sorts the ranks into.
template <class Key> Scope widest(const NodeMap& nodes, Key key) {
  std::map<int, std::vector<int>> groups;
  for (int r = 0; r < static_cast<int>(nodes.node_of_rank.size()); ++r)
    groups[key(r)].push_back(r);
  Scope s = Scope::intra;
  for (const auto& [k, ranks] : groups)
    s = wider_scope(s, group_scope(nodes, ranks));
  return s;
}

// The group sizes measured over `n` ranks or nodes: powers of two from 2 dividing n, and n.
std::vector<int> layout_sizes(int n) {
  std::vector<int> sizes;
  for (int g = 2; g <= n; g *= 2)
    if (n % g == 0) sizes.push_back(g);
  if (n >= 2 && (sizes.empty() || sizes.back() != n)) sizes.push_back(n);
  return sizes;
}

} // namespace

GridScopes grid_scopes(const NodeMap& nodes, int tp, int pp, int ep) {
  GridScopes s;
  const int stage = tp * pp;
  s.tp = widest(nodes, [&](int r) { return r / tp; });
  s.pp = widest(nodes, [&](int r) { return r / stage * tp + r % tp; });
  s.dp = widest(nodes, [&](int r) { return r % stage; });
  // ep consecutive places of a stage a group.
  s.ep = widest(nodes, [&](int r) {
    const GridCoords c = grid_coords(r, tp, pp);
    return stage_place(c, tp) / ep * pp + c.pp_rank;
  });
  const int ranks = static_cast<int>(nodes.node_of_rank.size());
  for (int r = 0; r + tp < ranks; ++r)
    if ((r / tp) % pp + 1 < pp) s.p2p = wider_scope(s.p2p, group_scope(nodes, {r, r + tp}));
  return s;
}

std::vector<GroupLayout> roof_layouts(const NodeMap& nodes) {
  const int ranks = static_cast<int>(nodes.node_of_rank.size());
  std::vector<int> count(static_cast<size_t>(nodes.nodes), 0), local(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    local[static_cast<size_t>(r)] = count[static_cast<size_t>(nodes.node_of_rank[r])]++;
  int common = 0; // the largest count that divides every node's ranks
  for (int c : count)
    common = std::gcd(common, c);
  std::vector<GroupLayout> out;
  auto add = [&](Scope scope, int size, int group_nodes, auto color_of) {
    GroupLayout l{scope, size, group_nodes, {}};
    for (int r = 0; r < ranks; ++r)
      l.color.push_back(
          color_of(nodes.node_of_rank[static_cast<size_t>(r)], local[static_cast<size_t>(r)]));
    out.push_back(std::move(l));
  };
  for (int g : layout_sizes(common))
    add(Scope::intra, g, 1, [&](int node, int i) { return node * ranks + i / g; });
  if (nodes.nodes < 2) return out;
  if (nodes.ranks_per_node == 0) {
    add(Scope::hier, ranks, nodes.nodes, [](int, int) { return 0; });
    return out;
  }
  for (int h : layout_sizes(nodes.nodes))
    add(Scope::inter, h, h, [&](int node, int i) { return i * nodes.nodes + node / h; });
  if (nodes.ranks_per_node > 1)
    for (int h : layout_sizes(nodes.nodes))
      add(Scope::hier, h * nodes.ranks_per_node, h, [&](int node, int) { return node / h; });
  return out;
}

std::vector<std::vector<std::pair<int, int>>> node_pair_rounds(int nodes) {
  if (nodes < 2) return {};
  const int m = nodes + nodes % 2;
  std::vector<int> ring(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i)
    ring[static_cast<size_t>(i)] = i;
  std::vector<std::vector<std::pair<int, int>>> rounds;
  for (int r = 0; r + 1 < m; ++r) {
    std::vector<std::pair<int, int>> pairs;
    for (int k = 0; k < m / 2; ++k) {
      const int a = ring[static_cast<size_t>(k)], b = ring[static_cast<size_t>(m - 1 - k)];
      if (a < nodes && b < nodes) pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    rounds.push_back(pairs);
    std::rotate(ring.begin() + 1, ring.end() - 1, ring.end()); // node 0 stays, the rest turn
  }
  return rounds;
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
