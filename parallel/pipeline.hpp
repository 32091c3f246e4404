// The pipeline driver: one stage's program of a schedule (schedule.hpp) run on its TrainStage.
// Exchanges are posted on the p2p lane, an action waits only for the exchange carrying its
// receive, activation sets are taken and given back as the program reads them, and every
// iteration ends with a flush over the stages. Also the stage's timed action costs and the
// per-iteration pipeline figures read from its timeline.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "collectives/communicator.hpp"
#include "core/timeline.hpp"
#include "models/backend.hpp"
#include "parallel/schedule.hpp"
#include "parallel/train_stage.hpp"

namespace ridgeline {

/// How a stage runs a program, read from the program alone. An activation set (microbatch,
/// chunk) is taken by its first transfer or action and given back after the step where its
/// last action has run (the forward in prefill, the backward or backward_weight in training),
/// all its sends are posted, and the compute has waited for an exchange at or after its last
/// send. A stage's exchanges run in order on its lane, so a wait for one covers every earlier
/// one.
struct ProgramPlan {
  std::vector<int> wait_for; ///< per step: the exchange (step) its action waits for, or -1
  std::vector<std::vector<std::pair<int, int>>> release_after; ///< per step
  std::vector<std::pair<int, int>> release_at_end;             ///< after the last wait
  std::set<int> waited;                                        ///< exchanges some action waits for
  std::vector<int> sets; ///< per chunk: the most sets held at once
};
ProgramPlan plan_program(const std::vector<Step>& program, int chunks, bool train);

/// What a pipeline stage is given besides its TrainStage.
struct PipelineSpec {
  Schedule schedule;
  int stages = 1;  ///< pp
  int stage = 0;   ///< this rank's pp_rank
  int replica = 0; ///< this rank's dp_rank
  int microbatches = 1;
  bool train = true;
  float sgd_lr = 0;
  uint64_t seed = 0;
  ActionCosts costs; ///< zb-h1's order is built for them
};

class PipelineDriver {
public:
  /// `pp`: the pipeline group (null with one stage); `dp`: the stage's data-parallel reduction.
  /// Allocates every activation set the program holds at once, and the first stage's inputs and
  /// the last stage's loss gradients of every microbatch.
  PipelineDriver(Backend& backend, Communicator* pp, const DataParallel& dp, TrainStage& stage,
                 OpTable& ops, const PipelineSpec& spec);

  /// One iteration of the program (and, training, the gradient reduction and SGD step).
  void step(Recorder& rec);
  /// Generates the first stage's inputs and the last stage's loss gradients again where the
  /// rows this rank holds changed with the stage's strategy (TrainStage::row_units); after
  /// TrainStage::set_variant.
  void refresh_inputs();
  /// Runs one more iteration that keeps what the check compares (untimed, unrecorded): the
  /// last stage's outputs (forward only) or the first stage's input gradients (train), one per
  /// microbatch.
  void capture();
  const std::vector<std::vector<float>>& outputs() const { return m_outputs; }
  const std::vector<std::vector<float>>& input_grads() const { return m_input_grads; }
  /// Whether the pipeline's exchanges are timed on a device queue (NCCL), not as MPI posts.
  bool exchanges_timed() const { return m_pp != nullptr && m_pp->stream_ordered(); }

private:
  void run(Recorder& rec, const Action& a, bool first_stage, bool last_stage, int last_chunk);
  void post(Recorder& rec, size_t step, const std::vector<Transfer>& transfers);
  void wait(Recorder& rec, int step);
  void flush(Recorder& rec);

  Backend& m_backend;
  Communicator* m_pp;
  TrainStage& m_stage;
  PipelineSpec m_spec;
  std::vector<Step> m_program;
  ProgramPlan m_plan;
  std::vector<char> m_exchange_tags; ///< one address per step: the MPI requests of an exchange
  std::vector<size_t> m_held_fences; ///< per exchange some action waits for, on GPUs
  int m_covered = -1;                ///< every exchange up to this step has finished
  bool m_has_exchanges = false;
  int32_t m_exchange_id = -1, m_wait_id = -1, m_flush_id = -1;
  std::vector<Buffer> m_inputs, m_grads;
  int m_row_units = 0; ///< the layout m_inputs and m_grads were generated for
  Buffer m_flush_buf;
  double m_act_bytes = 0;
  bool m_capture = false;
  bool m_dp_shard = false;
  OpTable& m_ops;
  std::vector<std::vector<float>> m_outputs, m_input_grads;
};

/// The stage's action times, for the schedule's order (zb-h1 is built for them) and its
/// simulated bubble: one microbatch through the stage's forward and its backward as the schedule
/// runs it (`split`: input gradients, then weight gradients; else both at once), each timed
/// alone with the device synchronised around it, median of three after one untimed round. Every
/// rank of `world` takes the largest of each, so that all stages build the same programs.
ActionCosts measure_action_costs(Backend& backend, TrainStage& stage, OpTable& ops, bool split,
                                 MPI_Comm world);

/// Per iteration of a stage's timed rows: the share of the iteration its compute lane was idle
/// (the bubble), the time its compute waited for exchanges (pp_wait), and the data-parallel
/// reduction left after its last compute op; medians over the timed iterations.
struct StageTimes {
  double bubble = 0;
  double exchange_ns = 0;
  double dp_exposed_ns = 0;
};
StageTimes stage_times(const std::vector<TimelineRecord>& rows, const OpTable& ops);

} // namespace ridgeline
