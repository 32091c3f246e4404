// The process grid: world ranks laid out as dp x pp x tp with TP innermost (TP groups stay on
// one node), and the sub-communicators of each dimension.
#pragma once

#include <mpi.h>

namespace ridgeline {

/// Coordinates of one rank. world = (dp_rank * pp + pp_rank) * tp + tp_rank.
struct GridCoords {
  int tp_rank = 0;
  int pp_rank = 0;
  int dp_rank = 0;
};

GridCoords grid_coords(int world_rank, int tp, int pp);
int grid_rank(const GridCoords& c, int tp, int pp);

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
