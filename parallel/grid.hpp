// The process grid: world ranks laid out as dp x pp x tp with TP innermost, the nodes the ranks
// sit on, and the sub-communicators of each dimension. With ranks placed node by node (block),
// a TP group of at most a node's ranks stays inside one node and PP/DP go across nodes.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "models/roofs.hpp"

namespace ridgeline {

/// Coordinates of one rank. world = (dp_rank * pp + pp_rank) * tp + tp_rank.
struct GridCoords {
  int tp_rank = 0;
  int pp_rank = 0;
  int dp_rank = 0;
};

GridCoords grid_coords(int world_rank, int tp, int pp);
int grid_rank(const GridCoords& c, int tp, int pp);
/// The rank's place among the ranks of its stage, ordered by (dp rank, tp rank): dp_rank x tp +
/// tp_rank. An MoE layer's expert-parallel group is ep consecutive places (place / ep), the
/// rank's EP rank place % ep.
int stage_place(const GridCoords& c, int tp);

/// The nodes of a job, from the host name of each world rank (element r: rank r).
struct NodeMap {
  int nodes = 0;                 ///< distinct hosts
  int ranks_per_node = 0;        ///< the ranks of each node where every node has as many, else 0
  std::vector<int> node_of_rank; ///< per world rank: its node, numbered in order of first rank
};
NodeMap map_nodes(const std::vector<std::string>& hosts);

/// Why the TP groups of `tp` consecutive world ranks cannot each sit on one node (the first
/// group that spans nodes, named by its ranks and hosts), or empty where they all do.
std::string tp_span_problem(const std::vector<std::string>& hosts, int tp);

/// The scope of the group of world `ranks` (indices into nodes.node_of_rank): intra on one node,
/// inter with one rank on each of several nodes, else hier.
Scope group_scope(const NodeMap& nodes, const std::vector<int>& ranks);

/// Where the grid's groups sit, each the widest scope over every group of its kind, for the
/// grid of tp x pp over all of nodes.node_of_rank's ranks (dp = ranks / (tp x pp)); an MoE
/// layer's expert-parallel groups are `ep` consecutive ranks of a stage, ordered by (dp rank, tp
/// rank): at tp 1 ep consecutive replicas, at tp > 1 whole TP groups or blocks of one.
struct GridScopes {
  Scope tp = Scope::intra;  ///< TP groups: tp consecutive ranks
  Scope pp = Scope::intra;  ///< pipeline groups: one rank of each stage (the flush's all-reduce)
  Scope dp = Scope::intra;  ///< data-parallel groups: the replicas of one (tp rank, stage)
  Scope p2p = Scope::intra; ///< pairs of neighbouring stages (the pipeline's sends)
  Scope ep = Scope::intra;  ///< expert-parallel groups: ep consecutive ranks of a stage
};
GridScopes grid_scopes(const NodeMap& nodes, int tp, int pp, int ep = 1);

/// One cut of the world into groups for the interconnect roofs: every group has group_size
/// ranks on group_nodes nodes, all of one scope.
struct GroupLayout {
  Scope scope = Scope::intra;
  int group_size = 0;
  int group_nodes = 1;
  std::vector<int> color; ///< per world rank: its group (MPI_Comm_split's color)
};

/// The groups the interconnect roofs are measured over, every group of a layout running at
/// once: intra, each node's ranks in groups of g consecutive ones (g dividing every node's
/// ranks); with several nodes of as many ranks each, inter, the ranks of one local index on h
/// consecutive nodes, and (more than one rank a node) hier, every rank of h consecutive nodes;
/// with nodes of different sizes, hier over every rank. g and h: the powers of two from 2 that
/// divide the count, and the count itself.
std::vector<GroupLayout> roof_layouts(const NodeMap& nodes);

/// The rounds of a round robin over `nodes` nodes (the circle method; an odd count gives each
/// node one round without a partner): every pair (a < b) meets in exactly one round, each node in
/// at most one pair a round; nodes - 1 rounds (nodes for an odd count), none for one node.
std::vector<std::vector<std::pair<int, int>>> node_pair_rounds(int nodes);

/// Owns the TP, PP and DP sub-communicators of this rank. Every rank of `world` constructs it.
class ProcessGrid {
public:
  ProcessGrid(MPI_Comm world, int tp, int pp, int dp);
  ~ProcessGrid();
  ProcessGrid(const ProcessGrid&) = delete;
  ProcessGrid& operator=(const ProcessGrid&) = delete;

  int tp() const { return m_tp; }
  int pp() const { return m_pp; }
  int dp() const { return m_dp; }
  const GridCoords& coords() const { return m_coords; }
  /// The communicator the grid was built over.
  MPI_Comm world() const { return m_world; }
  MPI_Comm tp_comm() const { return m_tp_comm; }
  MPI_Comm pp_comm() const { return m_pp_comm; }
  MPI_Comm dp_comm() const { return m_dp_comm; }

private:
  int m_tp, m_pp, m_dp;
  GridCoords m_coords;
  MPI_Comm m_world;
  MPI_Comm m_tp_comm = MPI_COMM_NULL;
  MPI_Comm m_pp_comm = MPI_COMM_NULL;
  MPI_Comm m_dp_comm = MPI_COMM_NULL;
};

} // namespace ridgeline
