// The measurement protocol, the only measurement loop of the program: for each strategy of a
// workload, barrier -> warm-up -> timed iterations recorded op by op (no host sync inside);
// then the uninstrumented loops (full step, compute only, communication only) of every
// strategy taking turns round by round; NVML samples of each rank's GPU with the windows of
// every loop. Each rank keeps its own timeline and samples: nothing is gathered.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/run_data.hpp"
#include "core/timeline.hpp"
#include "core/watchdog.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {

/// What the protocol measures: one configuration under one or several strategies.
class Workload {
public:
  /// Which lanes a loop runs: everything, the compute without collectives, or the collectives
  /// without compute.
  enum class Mode { full, compute_only, comm_only };
  virtual ~Workload() = default;
  virtual size_t strategies() const = 0;
  virtual std::string strategy_name(size_t s) const = 0;
  /// Makes strategy `s` current (called before its timed loop and before each of its loops).
  virtual void select(size_t s) = 0;
  /// Fresh inputs for the current strategy, before its timed loop (not before the
  /// uninstrumented loops, whose outputs nobody checks).
  virtual void prepare() {}
  virtual void set_mode(Mode mode) = 0;
  /// Whether the compute-only and communication-only loops mean anything (not for replays of
  /// a captured graph, which runs what it captured).
  virtual bool lane_modes() const = 0;
  /// The index of the next step() within its loop: the warm-up, the timed loop and each
  /// uninstrumented loop count from 0 (a workload that generates a sequence of decode steps
  /// runs step index mod its length).
  virtual void set_position(int64_t index) {}
  /// One iteration of the current strategy on this rank, recorded into `rec`.
  virtual void step(Recorder& rec) = 0;
  /// After the current strategy's timed loop, before its stamps are resolved: enqueue anything
  /// else to time (e.g. standalone GEMM probes) as marks of `rec`.
  virtual void after_timed(Recorder& rec) {}
  /// After `rec` was flushed: resolve what after_timed() enqueued; check the output. Every rank.
  virtual void after_flush(Recorder& rec) {}
};

/// Loop times of one strategy, max over ranks: the timed loop's per-iteration mean, and the
/// uninstrumented loops' median over their sub-batches' per-iteration means (every round).
struct LoopTimes {
  double instrumented_ns = 0;
  double plain_ns = 0;
  double compute_only_ns = 0;
  double comm_only_ns = 0;
  int sub_batches = 1; ///< per round: the uninstrumented loops' medians are over these
};

/// One strategy as measured.
struct StrategyMeasurement {
  std::string name;
  std::vector<TimelineRecord> rows; ///< this rank's timeline
  LoopTimes loops;
  Attrs gpu; ///< NVML means per loop (gpu.<loop>.*), empty without samples
};

struct ProtocolOptions {
  int warmup = 3;
  int iters = 10;
  int sample_ms = 0; ///< NVML period; 0 = no samples
  int device = -1;   ///< CUDA device sampled
};

struct ProtocolResult {
  std::vector<StrategyMeasurement> strategies;
  int rounds = 1; ///< rounds of the interleaved uninstrumented loops
  /// This rank's NVML samples on the first strategy's epoch (empty without samples).
  std::vector<GpuSample> samples;
};

/// Rounds of the interleaved uninstrumented loops: 5 when strategies are compared, else 1.
int interleaved_rounds(size_t strategies);

/// Runs the protocol over `workload` on every rank (collective over `comm`).
ProtocolResult run_protocol(Workload& workload, Backend& backend, OpTable& ops, MPI_Comm comm,
                            Watchdog& watchdog, const ProtocolOptions& options);

/// The samples as the /ranks/<r>/samples table.
Table samples_table(const std::vector<GpuSample>& samples);

} // namespace ridgeline
