// Pipeline schedules as data: each stage's program of actions (forward, backward, or the backward
// split into input and weight gradients) and exchange steps (point-to-point transfers posted
// together), the layers of every model chunk, the theory bubble, and a simulator that runs the
// programs under the executor's semantics. Pure host code: no MPI, no device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ridgeline {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1 };

/// A pipeline schedule. `chunks` is the number of model chunks per stage (V): 1 except for
/// interleaved, where it is at least 2.
struct Schedule {
  ScheduleKind kind = ScheduleKind::gpipe;
  int chunks = 1;
};

/// Parses "gpipe", "1f1b", "interleaved:V" (V >= 2) or "zb-h1"; throws UsageError naming the
/// accepted forms.
Schedule parse_schedule(const std::string& text);
/// The text parse_schedule() reads back into the same schedule.
std::string schedule_name(const Schedule& schedule);

/// Every problem of running `schedule` over `stages` pipeline stages, `microbatches` microbatches
/// and `layers` model layers, train (forward and backward) or forward only; each one sentence
/// naming its flag (--schedule, --pp, --microbatches, --layers, --phase). Empty: valid.
/// zb-h1 is refused forward-only: without a backward pass it would be 1f1b under another name.
std::vector<std::string> schedule_problems(const Schedule& schedule, int stages, int microbatches,
                                           int64_t layers, bool train);

/// backward computes the input and the weight gradients together (gpipe, 1f1b, interleaved);
/// zb-h1 splits it into backward_input (B, which the previous stage waits for) and
/// backward_weight (W, which nothing waits for).
enum class ActionKind { forward, backward, backward_input, backward_weight };

/// One unit of compute of a stage: `kind` of microbatch `microbatch` through local model chunk
/// `chunk` (0..V-1).
struct Action {
  ActionKind kind = ActionKind::forward;
  int microbatch = 0;
  int chunk = 0;
};

/// One point-to-point transfer of a stage: the activation of (microbatch, chunk) sent to, or
/// received from, the neighbouring virtual stage (next for activations, previous for gradients),
/// or the input gradient sent to the previous / received from the next one. `chunk` is the local
/// chunk on this stage whose action produces (send) or consumes (receive) the data.
struct Transfer {
  bool send = false;
  bool gradient = false;
  int peer_stage = 0;
  int microbatch = 0;
  int chunk = 0;
};

/// One entry of a stage's program: an exchange (transfers the executor posts together on the
/// stage's p2p lane, like an NCCL group of send/recv) or an action; exactly one of the two is
/// non-empty.
struct Step {
  std::vector<Transfer> exchange;
  std::optional<Action> action;
};

/// Durations of one action of a stage, in any one unit (ns where measured), for the simulator
/// and for zb-h1's order.
/// `backward` is the fused backward; `p2p` is added to every transfer once both sides posted it.
struct ActionCosts {
  double forward = 1;
  double backward = 2;
  double backward_input = 1;
  double backward_weight = 1;
  double p2p = 0;
};

/// The whole program of `stage` (0..stages-1) for one iteration: forward only, or forward and
/// backward (`train`). zb-h1's order and the place of its transfers are chosen for `costs` (the
/// stages' action times; docs/ARCHITECTURE.md, "Pipeline schedules"): every stage must pass the
/// same. The other schedules do not depend on them. Throws UsageError when schedule_problems()
/// (at any layer count that fits) is not empty.
std::vector<Step> stage_program(const Schedule& schedule, int stage, int stages, int microbatches,
                                bool train, const ActionCosts& costs = ActionCosts{});

/// The global layers [first, first + count) of local chunk `chunk` on `stage`. Without
/// interleaving stage s holds layers/stages consecutive layers; interleaved, chunk c of stage s
/// is virtual stage c * stages + s of layers / (stages * V) layers each (Megatron's layout).
std::pair<int64_t, int64_t> chunk_layers(const Schedule& schedule, int stage, int stages, int chunk,
                                         int64_t layers);

/// Theory bubble fraction, idle / (idle + busy) summed over the stages, with free transfers:
/// gpipe and 1f1b (p - 1) / (m + p - 1) for any ratio of forward to backward time; interleaved
/// (p - 1) / (m V + p - 1), every chunk costing 1/V of a stage; zb-h1 (p - 1) / (3 m + p - 1) when
/// forward, backward_input and backward_weight take equal times. Forward only: the same with the
/// backward time zero (zb-h1 has no forward-only form).
double theory_bubble(const Schedule& schedule, int stages, int microbatches, bool train);

/// What simulate_pipeline() found. busy / idle / finish are per stage; idle = makespan - busy.
/// When `deadlocked` the times are those reached when no stage could progress.
struct Simulation {
  std::vector<double> busy;
  std::vector<double> idle;
  std::vector<double> finish;
  double makespan = 0;
  bool deadlocked = false;
  /// Summed idle over summed (idle + busy): the pipeline bubble fraction.
  double bubble() const;
};

/// Runs every stage's program (programs[s] is stage s's) as the executor does. The compute runs
/// the actions in order and posts each exchange as it reaches it, without waiting; an action
/// that needs a receive waits for the exchange carrying it (input_exchanges()). A stage's
/// exchanges run in order on its p2p lane (a stream): each starts once posted and the previous
/// one finished, and finishes when the peer exchange of each of its transfers (FIFO per pair of
/// stages, direction and kind) has started, plus `costs.p2p`. A stage finishes with its compute
/// and its lane. Deadlocked when a lane waits for a peer exchange that never starts. Throws
/// Error when a matched pair disagrees on microbatch or virtual stage.
Simulation simulate_pipeline(const std::vector<std::vector<Step>>& programs,
                             const ActionCosts& costs);
/// For each step of `program`: the step of the exchange carrying the receive its action needs
/// (the activation of a forward, the gradient of a backward or backward_input), or -1.
std::vector<int> input_exchanges(const std::vector<Step>& program);
/// Simulates stage_program() of every stage.
Simulation simulate_pipeline(const Schedule& schedule, int stages, int microbatches, bool train,
                             const ActionCosts& costs);

/// Peak number of (microbatch, chunk) pairs whose activations `program` holds at once: from the
/// forward until the last backward action of that pair (backward, or backward_weight under
/// zb-h1); a pair without a backward in the program is held during its forward only. Each pair
/// holds one chunk's activations.
int peak_in_flight(const std::vector<Step>& program);

} // namespace ridgeline
