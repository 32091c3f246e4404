// The nodes of a run across nodes with injected times: each node's figures, and the node whose
// compute stands out named slow, never one within the others' spread.
#include <gtest/gtest.h>

#include "app/node_summary.hpp"

namespace ridgeline {
namespace {

// `n` iterations around `base` ns (base, base + 10, base + 20, ...).
std::vector<double> around(double base, size_t n) {
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i)
    v.push_back(base + 10.0 * static_cast<double>(i % 3));
  return v;
}

RankSeries series(double compute, double span, size_t n = 20) {
  return {around(compute, n), around(span, n)};
}

TEST(Nodes, AStandingOutNodeIsNamedSlow) {
  const std::vector<NodeFigures> f = node_figures(
      {"a", "b", "c"}, {2, 2, 2}, {series(1000, 5000), series(1010, 5000), series(3000, 5010)});
  ASSERT_EQ(f.size(), 3u);
  EXPECT_FALSE(f[0].slow);
  EXPECT_FALSE(f[1].slow);
  EXPECT_TRUE(f[2].slow);
  EXPECT_EQ(slow_nodes(f), "c");
  EXPECT_DOUBLE_EQ(f[2].compute.median, 3010.0);
  EXPECT_LE(f[2].compute.lo, f[2].compute.median);
  EXPECT_GE(f[2].compute.hi, f[2].compute.median);
  EXPECT_EQ(f[1].node, "b");
  EXPECT_EQ(f[1].ranks, 2);
}

TEST(Nodes, NodesWithinEachOthersSpreadAreNotSlow) {
  // The same series on every node, and a node whose median is higher but inside the spread.
  std::vector<NodeFigures> f =
      node_figures({"a", "b"}, {1, 1}, {series(1000, 2000), series(1000, 2000)});
  EXPECT_EQ(slow_nodes(f), "");
  RankSeries wide{{900, 1000, 1100, 1200, 1300}, {2000, 2000, 2000, 2000, 2000}};
  RankSeries higher{{1000, 1100, 1200, 1300, 1400}, {2000, 2000, 2000, 2000, 2000}};
  f = node_figures({"a", "b"}, {1, 1}, {wide, higher});
  EXPECT_EQ(slow_nodes(f), "");
  // One node: nothing to stand out from.
  f = node_figures({"a"}, {4}, {series(5000, 6000)});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].slow);
}

TEST(Nodes, IterationsNoRankHadAreLeftOut) {
  RankSeries a = series(1000, 2000, 4), b = series(3000, 4000, 4);
  a.compute_ns.push_back(-1);
  a.span_ns.push_back(-1);
  b.compute_ns.push_back(-1);
  b.span_ns.push_back(-1);
  const std::vector<NodeFigures> f = node_figures({"a", "b"}, {1, 1}, {a, b});
  EXPECT_DOUBLE_EQ(f[0].compute.median, 1005.0); // 1000, 1010, 1020, 1000
  EXPECT_DOUBLE_EQ(f[1].span.median, 4005.0);
}

TEST(Nodes, RankSeriesSumsTheComputeLaneAndSpansEveryOp) {
  auto row = [](int32_t iteration, Lane lane, int64_t start, int64_t end, uint8_t warmup = 0) {
    TimelineRecord r{};
    r.iteration = iteration;
    r.lane = static_cast<uint8_t>(lane);
    r.warmup = warmup;
    r.t_start_ns = start;
    r.t_end_ns = end;
    return r;
  };
  const std::vector<TimelineRecord> rows = {
      row(0, Lane::compute, 0, 100),
      row(0, Lane::comm, 100, 400),
      row(0, Lane::compute, 400, 450),
      row(1, Lane::compute, 500, 520),
      row(1, Lane::p2p, 520, 900),
      row(0, Lane::compute, 0, 9999, 1)}; // a warm-up row: left out
  const RankSeries s = rank_series(rows, 3);
  EXPECT_EQ(s.compute_ns, (std::vector<double>{150, 20, -1}));
  EXPECT_EQ(s.span_ns, (std::vector<double>{450, 400, -1}));
}

TEST(Nodes, TheTableRoundTrips) {
  const std::vector<NodeFigures> f =
      node_figures({"a", "b"}, {2, 3}, {series(1000, 2000), series(3000, 4000)});
  const std::vector<NodeFigures> back = nodes_from_table(nodes_table(f));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].node, "b");
  EXPECT_EQ(back[1].ranks, 3);
  EXPECT_EQ(back[1].slow, f[1].slow);
  EXPECT_DOUBLE_EQ(back[0].compute.lo, f[0].compute.lo);
  EXPECT_DOUBLE_EQ(back[0].span.hi, f[0].span.hi);
}

} // namespace
} // namespace ridgeline
