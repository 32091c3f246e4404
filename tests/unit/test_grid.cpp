// The node-aware grid: nodes counted from the ranks' hosts, whether every TP group of
// consecutive ranks sits on one node, --tp auto resolved to the ranks of a node with DP taking
// the ranks left over, and the file layout a job across nodes writes by default.
#include <gtest/gtest.h>

#include <map>
#include <set>
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

// The scope of a group from where its ranks sit; a grid's groups each the widest of their kind.
TEST(Scopes, OfAGroupFromItsRanksNodes) {
  const NodeMap m = map_nodes(block(2, 4));
  EXPECT_EQ(group_scope(m, {0, 1, 2, 3}), Scope::intra);
  EXPECT_EQ(group_scope(m, {1}), Scope::intra);
  EXPECT_EQ(group_scope(m, {0, 4}), Scope::inter);
  EXPECT_EQ(group_scope(m, {2, 4}), Scope::inter);
  EXPECT_EQ(group_scope(m, {0, 1, 4}), Scope::hier);
  EXPECT_EQ(group_scope(m, {0, 1, 2, 3, 4, 5, 6, 7}), Scope::hier);
  EXPECT_EQ(wider_scope(Scope::inter, Scope::intra), Scope::inter);
  EXPECT_EQ(wider_scope(Scope::inter, Scope::hier), Scope::hier);
  Scope parsed = Scope::intra;
  for (Scope s : kScopes) {
    EXPECT_TRUE(parse_scope(scope_name(s), parsed));
    EXPECT_EQ(parsed, s);
  }
  EXPECT_FALSE(parse_scope("node", parsed));
}

// The scope of each kind of group of a grid: tp, pp, p2p (a pipeline send), dp.
void expect_scopes(const GridScopes& s, Scope tp, Scope pp, Scope p2p, Scope dp) {
  EXPECT_EQ(s.tp, tp);
  EXPECT_EQ(s.pp, pp);
  EXPECT_EQ(s.p2p, p2p);
  EXPECT_EQ(s.dp, dp);
}

TEST(Scopes, OfTheGridsGroups) {
  const Scope intra = Scope::intra, inter = Scope::inter, hier = Scope::hier;
  // Two nodes of 4: TP 4 inside each node, the replicas (DP 2) one rank per node; one stage: a
  // group of one rank.
  GridScopes s = grid_scopes(map_nodes(block(2, 4)), 4, 1);
  EXPECT_EQ(s.tp, intra);
  EXPECT_EQ(s.dp, inter);
  EXPECT_EQ(s.pp, intra);
  // TP 2 x PP 2 x DP 2: stages inside a node, the replicas across.
  expect_scopes(grid_scopes(map_nodes(block(2, 4)), 2, 2), intra, intra, intra, inter);
  // TP 2 x PP 2 on two nodes of 2: the stages across.
  expect_scopes(grid_scopes(map_nodes(block(2, 2)), 2, 2), intra, inter, inter, intra);
  // DP over every rank of two nodes of 2: hierarchical; TP 8 over them too.
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 2)), 1, 1).dp, hier);
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 4)), 8, 1).tp, hier);
  // PP 4 of single ranks on two nodes of 2: one pair of stages crosses, the group is hier.
  s = grid_scopes(map_nodes(block(2, 2)), 1, 4);
  EXPECT_EQ(s.p2p, inter);
  EXPECT_EQ(s.pp, hier);
  // One node: everything intra.
  expect_scopes(grid_scopes(map_nodes(block(1, 8)), 2, 2), intra, intra, intra, intra);
  // EP groups of consecutive DP replicas on two nodes of 4 (TP 1): EP 4 inside each node, EP 8
  // over both; without EP each rank is its own group.
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 4)), 1, 1, 4).ep, intra);
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 4)), 1, 1, 8).ep, hier);
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 4)), 1, 1).ep, intra);
  // At TP 2 an EP group is ep consecutive ranks of the stage: EP 2 is a TP group, EP 4 two TP
  // groups of one node, EP 8 both nodes'.
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 4)), 2, 1, 2).ep, intra);
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 4)), 2, 1, 4).ep, intra);
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 4)), 2, 1, 8).ep, hier);
  // On nodes of 2 with TP 2, EP 4 crosses them with two ranks each: hier.
  EXPECT_EQ(grid_scopes(map_nodes(block(2, 2)), 2, 1, 4).ep, hier);
  // TP 4 x EP 2: two EP groups inside each TP group.
  EXPECT_EQ(grid_scopes(map_nodes(block(4, 2)), 4, 1, 2).ep, intra);
}

// Every group of a layout has its size, its scope and its nodes.
void expect_groups(const NodeMap& m, const GroupLayout& l) {
  std::map<int, std::vector<int>> groups;
  for (size_t r = 0; r < l.color.size(); ++r)
    groups[l.color[r]].push_back(static_cast<int>(r));
  for (const auto& [color, ranks] : groups) {
    EXPECT_EQ(static_cast<int>(ranks.size()), l.group_size) << scope_name(l.scope);
    EXPECT_EQ(group_scope(m, ranks), l.scope) << "group " << color;
    std::set<int> nodes;
    for (int r : ranks)
      nodes.insert(m.node_of_rank[static_cast<size_t>(r)]);
    EXPECT_EQ(static_cast<int>(nodes.size()), l.group_nodes) << "group " << color;
  }
}

std::vector<std::string> layout_names(const std::vector<GroupLayout>& layouts) {
  std::vector<std::string> names;
  for (const GroupLayout& l : layouts)
    names.push_back(std::string(scope_name(l.scope)) + " x" + std::to_string(l.group_size));
  return names;
}

TEST(Scopes, RoofLayoutsCoverEveryScopeTheNodesAllow) {
  const NodeMap two = map_nodes(block(2, 2));
  const std::vector<GroupLayout> l = roof_layouts(two);
  EXPECT_EQ(layout_names(l), (std::vector<std::string>{"intra x2", "inter x2", "hier x4"}));
  for (const GroupLayout& g : l)
    expect_groups(two, g);
  // The inter groups pair the ranks of one local index: {0, 2} and {1, 3}.
  EXPECT_EQ(l[1].color[0], l[1].color[2]);
  EXPECT_NE(l[1].color[0], l[1].color[1]);

  const NodeMap four = map_nodes(block(4, 4));
  const std::vector<GroupLayout> wide = roof_layouts(four);
  EXPECT_EQ(layout_names(wide), (std::vector<std::string>{"intra x2", "intra x4", "inter x2",
                                                          "inter x4", "hier x8", "hier x16"}));
  for (const GroupLayout& g : wide)
    expect_groups(four, g);
  // One node: groups within it only, as before scopes (and the whole node where it is no power
  // of two).
  EXPECT_EQ(layout_names(roof_layouts(map_nodes(block(1, 4)))),
            (std::vector<std::string>{"intra x2", "intra x4"}));
  EXPECT_EQ(layout_names(roof_layouts(map_nodes(block(1, 6)))),
            (std::vector<std::string>{"intra x2", "intra x6"}));
  EXPECT_TRUE(roof_layouts(map_nodes(block(1, 1))).empty());
  // A rank per node: across nodes only.
  EXPECT_EQ(layout_names(roof_layouts(map_nodes(block(3, 1)))),
            (std::vector<std::string>{"inter x3"}));
  // Nodes of different sizes: groups that fit every node, and every rank.
  const NodeMap uneven = map_nodes({"a", "a", "a", "a", "b", "b"});
  const std::vector<GroupLayout> odd = roof_layouts(uneven);
  EXPECT_EQ(layout_names(odd), (std::vector<std::string>{"intra x2", "hier x6"}));
  for (const GroupLayout& g : odd)
    expect_groups(uneven, g);
  // Round-robin placement: scopes follow the nodes, not the rank numbers.
  const NodeMap rr = map_nodes({"a", "b", "a", "b"});
  for (const GroupLayout& g : roof_layouts(rr))
    expect_groups(rr, g);
}

// The inter-node pairing: every pair of nodes once, no node twice in a round, as few rounds as
// the circle method gives (an odd count: one round off for each node).
TEST(NodePairRounds, EveryPairOnceNoNodeTwiceARound) {
  EXPECT_TRUE(node_pair_rounds(1).empty());
  EXPECT_EQ(node_pair_rounds(2), (std::vector<std::vector<std::pair<int, int>>>{{{0, 1}}}));
  for (int n : {3, 4, 5, 8, 13}) {
    const auto rounds = node_pair_rounds(n);
    EXPECT_EQ(static_cast<int>(rounds.size()), n % 2 ? n : n - 1) << n;
    std::set<std::pair<int, int>> met;
    for (const auto& pairs : rounds) {
      std::set<int> busy;
      EXPECT_EQ(static_cast<int>(pairs.size()), n / 2) << n;
      for (const auto& [a, b] : pairs) {
        EXPECT_TRUE(0 <= a && a < b && b < n) << n;
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << n;
        EXPECT_TRUE(met.insert({a, b}).second) << n << ": " << a << "-" << b << " twice";
      }
    }
    EXPECT_EQ(static_cast<int>(met.size()), n * (n - 1) / 2) << n;
  }
}

} // namespace
} // namespace ridgeline
