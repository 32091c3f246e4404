// Process grid construction with MPI_Comm_split.
#include "parallel/grid.hpp"

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
