// Where each rank is, readable while it is blocked: the phase and iteration the main thread
// marks, published on a node-local board (an MPI shared-memory window) with a heartbeat that a
// monitor thread keeps fresh. A rank that times out reads the board to name the rank it waits
// for (stopped, dead, or behind); rank 0's monitor thread also prints the progress line.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ridgeline {
namespace progress {

/// Starts a new phase of this process (outside timed loops: takes a lock, copies the text).
void set_phase(const std::string& what);
/// The text of the current phase.
std::string phase();
/// Marks iteration `k` of the current phase: relaxed atomic stores only, no lock, no system
/// call, so it may sit inside a timed loop.
void set_iteration(int64_t k);
/// Counts only: (phase sequence number, iteration); changes whenever this process progresses.
std::pair<int64_t, int64_t> position();

/// Rank 0's progress line on stderr (off unless enabled): `command` names it ("run", "sweep").
/// Refreshed by the monitor thread every 2 s on a terminal (one line rewritten with carriage
/// returns), every 5 s otherwise (plain lines). Main thread, rank 0 only.
void enable_line(const std::string& command);
/// The sweep's point: `k` (1-based) of `n`, `label` shown beside it.
void set_point(int64_t k, int64_t n, const std::string& label);
/// The next `iterations` calls of set_iteration() belong to one loop of a measurement that
/// plan() sized; they move the line's "k of n iterations" and its ETA.
void begin_loop(int64_t iterations);
/// A measurement of `iterations` iterations in all starts (resets the count).
void plan(int64_t iterations);
/// Prints the line's final state ("<command>: [point k of n, ]done in S s[ (note)]") and stops
/// the line.
void finish_line(const std::string& note);

/// The node-local board. MpiSession owns the one of the process; every rank of `world`
/// constructs it (collective). Without it the functions above still work for this process.
class Board {
public:
  Board(MPI_Comm world, int rank, const std::string& hostname);
  ~Board();
  Board(const Board&) = delete;
  Board& operator=(const Board&) = delete;

  /// Why this rank is still waiting, from what the board shows of the other ranks: those that
  /// stopped, died or have not reached this rank's phase and iteration (one sentence).
  /// `other_host`: set to whether the answer lies on another host (every rank of this host is
  /// running and level, and other hosts take part).
  std::string diagnose(bool* other_host = nullptr) const;

private:
  struct Shared;
  MPI_Comm m_node = MPI_COMM_NULL;
  MPI_Win m_win = MPI_WIN_NULL;
  Shared* m_shared = nullptr;
};

/// The process's board, or nullptr (set by Board's constructor).
const Board* board();

} // namespace progress
} // namespace ridgeline
