// The nodes' figures under mpiexec -n 2 and 4, with injected timelines on an injected node map
// (the last half of the ranks on a second node, whose compute ops take three times as long):
// rank 0 gets one row per node and names the second node slow, with no timeline leaving its rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "app/node_summary.hpp"

namespace ridgeline {
namespace {

TEST(NodesMpi, TheNodeWhoseComputeStandsOutIsNamed) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "skipped: needs 2 ranks or more";
  std::vector<std::string> hosts;
  for (int r = 0; r < size; ++r)
    hosts.push_back(r < size / 2 ? "node-a" : "node-b");
  const NodeMap nodes = map_nodes(hosts);
  const bool slow = rank >= size / 2;
  // 20 timed iterations: a compute op (1 us, or 3 us on node-b, varying by rank and iteration)
  // then a collective that ends when the slowest rank's compute does, as it would.
  std::vector<TimelineRecord> rows;
  for (int32_t i = 0; i < 20; ++i) {
    const int64_t start = 10000 * i;
    const int64_t compute = (slow ? 3000 : 1000) + 10 * ((i + rank) % 3);
    TimelineRecord op{};
    op.iteration = i;
    op.lane = static_cast<uint8_t>(Lane::compute);
    op.t_start_ns = start;
    op.t_end_ns = start + compute;
    rows.push_back(op);
    TimelineRecord wait = op;
    wait.lane = static_cast<uint8_t>(Lane::comm);
    wait.t_start_ns = op.t_end_ns;
    wait.t_end_ns = start + 3100;
    rows.push_back(wait);
  }
  const std::vector<NodeFigures> f = summarize_nodes(MPI_COMM_WORLD, nodes, hosts, rows);
  if (rank != 0) {
    EXPECT_TRUE(f.empty());
    return;
  }
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].node, "node-a");
  EXPECT_EQ(f[1].node, "node-b");
  EXPECT_EQ(f[0].ranks, size / 2);
  EXPECT_EQ(f[1].ranks, size - size / 2);
  EXPECT_FALSE(f[0].slow);
  EXPECT_TRUE(f[1].slow);
  EXPECT_EQ(slow_nodes(f), "node-b");
  // Every rank's span is the same (the collective ends together): the span names no node.
  EXPECT_DOUBLE_EQ(f[0].span.median, 3100.0);
  EXPECT_DOUBLE_EQ(f[1].span.median, 3100.0);
  // Per iteration the longest of the node's ranks.
  EXPECT_GE(f[1].compute.median, 3000.0);
  EXPECT_LE(f[0].compute.median, 1020.0);
}

TEST(NodesMpi, OneNodeHasNoFigures) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::vector<std::string> hosts(static_cast<size_t>(size), "node-a");
  EXPECT_TRUE(summarize_nodes(MPI_COMM_WORLD, map_nodes(hosts), hosts, {}).empty());
}

} // namespace
} // namespace ridgeline
