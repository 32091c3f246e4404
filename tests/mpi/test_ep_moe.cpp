// MPI tests of expert parallelism: the all-to-all-v of the MPI communicator and of the grouped
// send/recv every other communicator runs, and the expert-parallel MoE step of every rank (EP =
// the ranks, and EP groups of 2 within them) against one rank computing every expert on the
// same tokens, under the router, uniform and Zipf routings (run under mpiexec -n 1, 2 and 4).
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <vector>

#include "collectives/communicator.hpp"
#include "core/stats.hpp"
#include "models/moe_layer.hpp"
#include "parallel/ep_moe.hpp"
#include "tests/support/mpi_world.hpp"
#include "tests/support/small_moe.hpp"

namespace ridgeline {
namespace {

// Rank r sends r + j + 1 elements to rank j, each r * 100 + j: both implementations.
TEST(AllToAllV, UnequalBlocksReachTheirRanks) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD);
  const int n = comm->size(), r = comm->rank();
  std::vector<size_t> sc, so, rc, ro;
  std::vector<float> send;
  for (int j = 0; j < n; ++j) {
    so.push_back(send.size());
    sc.push_back(static_cast<size_t>(r + j + 1));
    send.insert(send.end(), sc.back(), static_cast<float>(r * 100 + j));
  }
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    ro.push_back(total);
    rc.push_back(static_cast<size_t>(i + r + 1));
    total += rc.back();
  }
  for (bool grouped : {false, true}) {
    std::vector<float> recv(total, -1.0f);
    if (grouped)
      comm->Communicator::all_to_all_v(send.data(), sc, so, recv.data(), rc, ro, DType::f32,
                                       nullptr);
    else
      comm->all_to_all_v(send.data(), sc, so, recv.data(), rc, ro, DType::f32, nullptr);
    comm->complete(nullptr);
    for (int i = 0; i < n; ++i)
      for (size_t e = 0; e < rc[static_cast<size_t>(i)]; ++e)
        ASSERT_EQ(recv[ro[static_cast<size_t>(i)] + e], static_cast<float>(i * 100 + r))
            << (grouped ? "grouped send/recv" : "MPI_Ialltoallv") << " from rank " << i;
  }
}

// Each rank's output of the EP step over groups of `ep` ranks against moe_forward of every
// expert on its own tokens: the largest relative L2 error over the ranks.
double ep_step_error(const ModelSpec& m, const RoutingControl& control, int ep) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm group = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank / ep, rank, &group);
  std::unique_ptr<Communicator> comm = ep > 1 ? make_mpi_communicator(group) : nullptr;
  std::unique_ptr<Backend> backend = make_host_backend();
  const int64_t tokens = 10, h = m.hidden;
  const uint64_t seed = 77;
  EpMoeSpec spec;
  spec.model = m;
  spec.routing = control;
  spec.ep = ep;
  spec.ep_rank = rank % ep;
  spec.first_layer = 2;
  spec.tokens = tokens;
  spec.seed = seed;
  double err = 0;
  {
    EpMoe moe(*backend, comm.get(), group, spec);
    Buffer xb = backend->allocate(tokens, h), yb = backend->allocate(tokens, h),
           rb = backend->allocate(tokens, h);
    const Tensor x = xb.view(tokens, h, DType::f32), y = yb.view(tokens, h, DType::f32),
                 ref = rb.view(tokens, h, DType::f32);
    // Each rank its own tokens.
    backend->fill_random(x, GenKey{seed, 999, h, 1.0f}, rank * tokens, 0);
    OpTable ops;
    Recorder rec(backend->clock(), ops);
    rec.set_enabled(false);
    moe.forward(rec, 2, x, y);
    const MoeWeights whole = make_moe_weights(*backend, m, 2, seed, 0, m.experts);
    moe_forward(*backend, m, whole, x, ref, control);
    err = relative_l2(backend->to_host(y), backend->to_host(ref));
    EXPECT_EQ(moe.rows_history().size(), 1u);
    const MoeLoad load = moe.group_load(0);
    EXPECT_EQ(load.rank_rows[static_cast<size_t>(rank % ep)], moe.rows_history().front());
    EXPECT_DOUBLE_EQ(moe.imbalance_history().front(), load.rank_imbalance());
  }
  comm.reset();
  MPI_Comm_free(&group);
  MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return err;
}

TEST(EpMoe, EveryLayoutMatchesOneRankOfEveryExpert) {
  const int n = world_size();
  std::vector<int> eps = {n};
  if (n > 2) eps.push_back(2);
  const std::vector<std::pair<ModelSpec, RoutingControl>> cases = {
      {small_moe(GatingKind::softmax, 0, 8), RoutingControl{}},
      {small_moe(GatingKind::sigmoid, 1, 8), RoutingControl{}},
      {small_moe(GatingKind::softmax, 0, 8), RoutingControl{RoutingMode::uniform, 0.0, 0}},
      {small_moe(GatingKind::softmax, 1, 8), RoutingControl{RoutingMode::zipf, 1.4, 9}}};
  for (int ep : eps)
    for (const auto& [m, control] : cases)
      EXPECT_LE(ep_step_error(m, control, ep), 1e-6)
          << "ep " << ep << ", " << routing_mode_name(control.mode) << " routing";
}

} // namespace
} // namespace ridgeline
