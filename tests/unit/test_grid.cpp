// The node-aware grid: nodes counted from the ranks' hosts, whether every TP group of
// consecutive ranks sits on one node, --tp auto resolved to the ranks of a node with DP taking
// the ranks left over, and the file layout a job across nodes writes by default.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/config.hpp"
#include "parallel/grid.hpp"

namespace ridgeline {
namespace {

// `nodes` hosts of `per_node` ranks each, placed node by node (block).
std::vector<std::string> block(int nodes, int per_node) {
  std::vector<std::string> hosts;
  for (int n = 0; n < nodes; ++n)
    for (int r = 0; r < per_node; ++r)
      hosts.push_back("node" + std::to_string(n));
  return hosts;
}

TEST(Nodes, CountedFromTheHostOfEachRank) {
  const NodeMap m = map_nodes(block(3, 4));
  EXPECT_EQ(m.nodes, 3);
  EXPECT_EQ(m.ranks_per_node, 4);
  EXPECT_EQ(m.node_of_rank, (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  // Round-robin placement: the same nodes, numbered by their first rank.
  const NodeMap rr = map_nodes({"b", "a", "b", "a"});
  EXPECT_EQ(rr.nodes, 2);
  EXPECT_EQ(rr.ranks_per_node, 2);
  EXPECT_EQ(rr.node_of_rank, (std::vector<int>{0, 1, 0, 1}));
}

TEST(Nodes, UnevenNodesHaveNoRanksPerNode) {
  const NodeMap m = map_nodes({"a", "a", "a", "b"});
  EXPECT_EQ(m.nodes, 2);
  EXPECT_EQ(m.ranks_per_node, 0);
}

TEST(Nodes, TpGroupsInsideANodeAreAccepted) {
  for (int tp : {1, 2, 4})
    EXPECT_EQ(tp_span_problem(block(2, 4), tp), "") << "tp " << tp;
  EXPECT_EQ(tp_span_problem(block(1, 8), 8), "");
}

TEST(Nodes, TpGroupAcrossNodesIsNamed) {
  const std::string p = tp_span_problem(block(2, 4), 8);
  EXPECT_NE(p.find("world ranks 0..7"), std::string::npos) << p;
  EXPECT_NE(p.find("rank 4 on node1"), std::string::npos) << p;
  // Groups of 2 on nodes of 3 ranks: ranks 2..3 straddle the boundary.
  const std::string odd = tp_span_problem(block(2, 3), 2);
  EXPECT_NE(odd.find("world ranks 2..3"), std::string::npos) << odd;
  // Round-robin placement splits every group.
  EXPECT_NE(tp_span_problem({"a", "b", "a", "b"}, 2), "");
}

TEST(Nodes, TpAutoIsTheRanksOfANodeAndDpTakesTheRest) {
  RunConfig c;
  c.tp = 0; // --tp auto
  EXPECT_TRUE(resolve_grid(c, map_nodes(block(2, 4)), 8).empty());
  EXPECT_EQ(c.tp, 4);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 2);

  RunConfig pipeline;
  pipeline.tp = 0;
  pipeline.pp = 2;
  EXPECT_TRUE(resolve_grid(pipeline, map_nodes(block(2, 2)), 4).empty());
  EXPECT_EQ(pipeline.tp, 2);
  EXPECT_EQ(pipeline.dp, 1); // tp x pp is every rank

  RunConfig one_node;
  one_node.tp = 0;
  EXPECT_TRUE(resolve_grid(one_node, map_nodes(block(1, 4)), 4).empty());
  EXPECT_EQ(one_node.tp, 4);
  EXPECT_EQ(one_node.dp, 1);

  RunConfig given;
  given.tp = 2;
  EXPECT_TRUE(resolve_grid(given, map_nodes(block(2, 4)), 8).empty());
  EXPECT_EQ(given.tp, 2);
  EXPECT_EQ(given.dp, 1); // a numeric --tp is left to validate()
}

TEST(Nodes, TpAutoRefusesNodesOfDifferentSizes) {
  RunConfig c;
  c.tp = 0;
  const std::vector<std::string> p = resolve_grid(c, map_nodes({"a", "a", "a", "b"}), 4);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("--tp auto"), std::string::npos) << p[0];
}

TEST(Nodes, AJobAcrossNodesWritesAFilePerNodeByDefault) {
  RunConfig across;
  apply_defaults(across, "host", 2);
  EXPECT_EQ(across.file_layout, "per-node");
  RunConfig given;
  given.file_layout = "single";
  apply_defaults(given, "host", 2);
  EXPECT_EQ(given.file_layout, "single"); // what was asked for (validate_shared checks it)
}

} // namespace
} // namespace ridgeline
