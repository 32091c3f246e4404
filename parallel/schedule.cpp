// Pipeline schedules: the order of each stage's actions, where its transfers are posted, the
// chunk layout, the theory bubble and the pipeline simulator (docs/ARCHITECTURE.md, "Pipeline
// schedules").
#include "parallel/schedule.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "core/error.hpp"

namespace ridgeline {
namespace {

const char* const accepted_forms =
    "gpipe, 1f1b, interleaved:V (V >= 2 model chunks per stage) or zb-h1";

bool is_backward(ActionKind k) {
  return k == ActionKind::backward || k == ActionKind::backward_input;
}

double duration(const Action& a, const ActionCosts& c) {
  switch (a.kind) {
  case ActionKind::forward:
    return c.forward;
  case ActionKind::backward:
    return c.backward;
  case ActionKind::backward_input:
    return c.backward_input;
  case ActionKind::backward_weight:
    return c.backward_weight;
  }
  return 0;
}

// Where a stage's data comes from and goes to. Virtual stage c * p + s; the next one of (s, c)
// is (s + 1, c), or (0, c + 1) on the last stage: the chunks form a ring over the stages.
struct Layout {
  int stages = 1;
  int chunks = 1;
  int virtual_stage(int stage, int chunk) const { return chunk * stages + stage; }
  int last_virtual() const { return stages * chunks - 1; }
  int next_stage(int stage) const { return (stage + 1) % stages; }
  int previous_stage(int stage) const { return (stage + stages - 1) % stages; }
};

// The receive an action needs before it runs, if any.
std::optional<Transfer> input_of(const Action& a, int stage, const Layout& l) {
  const int v = l.virtual_stage(stage, a.chunk);
  if (a.kind == ActionKind::forward && v > 0)
    return Transfer{false, false, l.previous_stage(stage), a.microbatch, a.chunk};
  if (is_backward(a.kind) && v < l.last_virtual())
    return Transfer{false, true, l.next_stage(stage), a.microbatch, a.chunk};
  return std::nullopt;
}

// The send that follows an action, if any.
std::optional<Transfer> output_of(const Action& a, int stage, const Layout& l) {
  const int v = l.virtual_stage(stage, a.chunk);
  if (a.kind == ActionKind::forward && v < l.last_virtual())
    return Transfer{true, false, l.next_stage(stage), a.microbatch, a.chunk};
  if (is_backward(a.kind) && v > 0)
    return Transfer{true, true, l.previous_stage(stage), a.microbatch, a.chunk};
  return std::nullopt;
}

class ProgramBuilder {
public:
  void exchange(std::vector<Transfer> transfers) {
    if (!transfers.empty()) m_steps.push_back(Step{std::move(transfers), std::nullopt});
  }
  void action(const Action& a) { m_steps.push_back(Step{{}, a}); }
  std::vector<Step> take() { return std::move(m_steps); }

private:
  std::vector<Step> m_steps;
};

void append(std::vector<Transfer>& to, const std::optional<Transfer>& t) {
  if (t) to.push_back(*t);
}

// Megatron's merging: the receive of the first action alone, then after every action one
// exchange with its send and the next action's receive.
std::vector<Step> merged_program(const std::vector<Action>& order, int stage, const Layout& l) {
  ProgramBuilder b;
  std::vector<Transfer> pending;
  for (const Action& a : order) {
    append(pending, input_of(a, stage, l));
    b.exchange(std::move(pending));
    pending.clear();
    b.action(a);
    append(pending, output_of(a, stage, l));
  }
  b.exchange(std::move(pending));
  return b.take();
}

std::vector<Action> forwards(int microbatches) {
  std::vector<Action> order;
  for (int mb = 0; mb < microbatches; ++mb)
    order.push_back({ActionKind::forward, mb, 0});
  return order;
}

// Megatron's 1F1B: p - s - 1 warm-up forwards, then one forward and one backward in turn, then
// the remaining backwards.
std::vector<Action> one_f_one_b_order(int stage, int stages, int microbatches,
                                      ActionKind backward) {
  const int warmup = std::min(stages - stage - 1, microbatches);
  std::vector<Action> order;
  for (int mb = 0; mb < warmup; ++mb)
    order.push_back({ActionKind::forward, mb, 0});
  for (int i = 0; i < microbatches - warmup; ++i) {
    order.push_back({ActionKind::forward, warmup + i, 0});
    order.push_back({backward, i, 0});
  }
  for (int mb = microbatches - warmup; mb < microbatches; ++mb)
    order.push_back({backward, mb, 0});
  return order;
}

// The k-th forward (or backward) of an interleaved stage: microbatches go in groups of p, each
// group through chunk 0, 1, ..., V-1 (backwards through V-1, ..., 0).
Action interleaved_action(int k, int stages, int chunks, bool forward) {
  const int group = k / (stages * chunks);
  const int in_group = k % (stages * chunks);
  const int chunk = in_group / stages;
  const int mb = group * stages + in_group % stages;
  return forward ? Action{ActionKind::forward, mb, chunk}
                 : Action{ActionKind::backward, mb, chunks - 1 - chunk};
}

// Megatron's interleaved 1F1B, with its communication: during warm-up the forward's send and the
// next forward's receive are one exchange (the last warm-up one also receives the first
// backward's gradient); in the steady state one exchange follows each forward-backward pair with
// both sends and the receives of the next forward and the next backward; in the cool-down each
// backward's send goes with the next backward's receive.
std::vector<Step> interleaved_train_program(int stage, const Layout& l, int microbatches) {
  const int total = microbatches * l.chunks;
  const int warmup = std::min((l.stages - stage - 1) * 2 + (l.chunks - 1) * l.stages, total);
  const int steady = total - warmup;
  auto fwd = [&](int k) { return interleaved_action(k, l.stages, l.chunks, true); };
  auto bwd = [&](int k) { return interleaved_action(k, l.stages, l.chunks, false); };
  ProgramBuilder b;
  std::vector<Transfer> x;
  auto flush = [&] {
    b.exchange(std::move(x));
    x.clear();
  };
  append(x, input_of(fwd(0), stage, l));
  flush();
  for (int k = 0; k < warmup; ++k) {
    b.action(fwd(k));
    append(x, output_of(fwd(k), stage, l));
    if (k + 1 < total) append(x, input_of(fwd(k + 1), stage, l));
    if (k == warmup - 1 && steady > 0) append(x, input_of(bwd(0), stage, l));
    flush();
  }
  if (steady == 0) {
    append(x, input_of(bwd(0), stage, l));
    flush();
  }
  for (int i = 0; i < steady; ++i) {
    b.action(fwd(warmup + i));
    b.action(bwd(i));
    append(x, output_of(fwd(warmup + i), stage, l));
    append(x, output_of(bwd(i), stage, l));
    if (warmup + i + 1 < total) append(x, input_of(fwd(warmup + i + 1), stage, l));
    append(x, input_of(bwd(i + 1), stage, l));
    flush();
  }
  for (int i = steady; i < total; ++i) {
    b.action(bwd(i));
    append(x, output_of(bwd(i), stage, l));
    if (i + 1 < total) append(x, input_of(bwd(i + 1), stage, l));
    flush();
  }
  return b.take();
}

// ZB-H1 order: 1F1B's order of forwards and input-gradient backwards; the weight gradient of
// microbatch j follows the input gradient of microbatch j + s, the rest come last. Stage s thus
// defers s weight gradients, which fill the cool-down bubble, and holds at most p microbatches
// (forward done, weight gradient not), the peak 1F1B reaches on its first stage.
std::vector<Action> zb_h1_order(int stage, int stages, int microbatches) {
  std::vector<Action> order;
  int next_w = 0;
  for (const Action& a :
       one_f_one_b_order(stage, stages, microbatches, ActionKind::backward_input)) {
    order.push_back(a);
    if (a.kind != ActionKind::backward_input) continue;
    for (; next_w <= a.microbatch - stage; ++next_w)
      order.push_back({ActionKind::backward_weight, next_w, 0});
  }
  for (; next_w < microbatches; ++next_w)
    order.push_back({ActionKind::backward_weight, next_w, 0});
  return order;
}

// List scheduling of zb-h1 for given action times: each stage, whenever it is free, runs the
// backward_input whose gradient has arrived (the previous stage waits for it), else the next
// forward whose activation has arrived while it holds fewer than p microbatches (forward done,
// weight gradient not: 1f1b's peak), else a deferred weight gradient, else waits. Forwards,
// input gradients and weight gradients each go in microbatch order. With `lazy` a weight
// gradient starts only where it ends before the next known arrival, or where nothing else can
// run until one arrives (memory full or no arrival known).
std::vector<std::vector<Action>> zb_h1_listed(int p, int m, const ActionCosts& c, bool lazy) {
  constexpr double never = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> f_end(p, std::vector<double>(m, never)), b_end(f_end);
  std::vector<std::vector<Action>> orders(p);
  std::vector<int> nf(p, 0), nb(p, 0), nw(p, 0);
  std::vector<double> free_at(p, 0);
  auto done = [&](int s) { return nw[s] == m; };
  for (;;) {
    double t = never;
    for (int s = 0; s < p; ++s)
      if (!done(s)) t = std::min(t, free_at[s]);
    if (t == never) break;
    bool any = false;
    double next = never;
    for (int s = 0; s < p; ++s) {
      if (done(s) || free_at[s] != t) continue;
      const bool room = nf[s] - nw[s] < p;
      const double f_ready =
          nf[s] < m && room ? (s == 0 ? 0.0 : f_end[s - 1][nf[s]] + c.p2p) : never;
      const double b_ready =
          nb[s] < nf[s] ? (s == p - 1 ? f_end[s][nb[s]] : b_end[s + 1][nb[s]] + c.p2p) : never;
      const double arrival = std::min(f_ready, b_ready);
      std::optional<Action> run;
      if (b_ready <= t) {
        run = Action{ActionKind::backward_input, nb[s], 0};
      } else if (f_ready <= t) {
        run = Action{ActionKind::forward, nf[s], 0};
      } else if (nw[s] < nb[s] && (!lazy || arrival == never || t + c.backward_weight <= arrival)) {
        run = Action{ActionKind::backward_weight, nw[s], 0};
      }
      if (!run) {
        next = std::min(next, arrival);
        continue;
      }
      const double end = t + duration(*run, c);
      if (run->kind == ActionKind::forward) f_end[s][nf[s]++] = end;
      if (run->kind == ActionKind::backward_input) b_end[s][nb[s]++] = end;
      if (run->kind == ActionKind::backward_weight) ++nw[s];
      orders[s].push_back(*run);
      free_at[s] = end;
      any = true;
    }
    if (any) continue;
    // Every stage free at t waits: until its next arrival or until another stage is free.
    for (int s = 0; s < p; ++s)
      if (!done(s) && free_at[s] > t) next = std::min(next, free_at[s]);
    RIDGELINE_REQUIRE(next != never && next > t, "zb-h1 list schedule cannot progress");
    for (int s = 0; s < p; ++s)
      if (!done(s) && free_at[s] == t) free_at[s] = next;
  }
  return orders;
}

using DataKey = std::tuple<int, bool, int, int>; // stage, gradient, microbatch, chunk

// Transfers placed by the timeline of `costs`: every action starts as soon as its stage is free
// and its input exists. Each send follows its action; each receive is posted at the last
// boundary of the receiving stage not later than the moment the data is produced, so that the
// receiver's lane does not hold later transfers long. With equal costs the programs reproduce
// the timeline exactly; whether they deadlock depends on the order alone, and the simulator
// tells (zb_h1_programs() keeps only programs that complete).
std::vector<std::vector<Step>> timeline_programs(const std::vector<std::vector<Action>>& orders,
                                                 const Layout& l, const ActionCosts& costs) {
  const int p = l.stages;
  std::vector<std::vector<double>> start(p), end(p);
  std::map<DataKey, double> produced; // by the producing stage and its chunk
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0);
  auto producer = [&](const Transfer& in, int stage) {
    // The data of a receive comes from the peer's chunk on the neighbouring virtual stage.
    const int v = l.virtual_stage(stage, in.chunk) + (in.gradient ? 1 : -1);
    return DataKey{v % p, in.gradient, in.microbatch, v / p};
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      for (; next[s] < orders[s].size(); ++next[s]) {
        const Action& a = orders[s][next[s]];
        double ready = free_at[s];
        if (const auto in = input_of(a, s, l)) {
          const auto it = produced.find(producer(*in, s));
          if (it == produced.end()) break;
          ready = std::max(ready, it->second);
        }
        start[s].push_back(ready);
        end[s].push_back(ready + duration(a, costs));
        free_at[s] = end[s].back();
        if (const auto out = output_of(a, s, l))
          produced[DataKey{s, out->gradient, a.microbatch, a.chunk}] = end[s].back();
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    RIDGELINE_REQUIRE(next[s] == orders[s].size(),
                      "pipeline order of stage " + std::to_string(s) + " waits on itself");

  std::vector<std::vector<Step>> programs(p);
  for (int s = 0; s < p; ++s) {
    const size_t n = orders[s].size();
    // Transfers at boundary i (before action i), keyed by the moment their data is produced.
    std::vector<std::vector<std::pair<double, Transfer>>> at(n + 1);
    for (size_t i = 0; i < n; ++i) {
      const Action& a = orders[s][i];
      if (const auto out = output_of(a, s, l)) at[i + 1].push_back({end[s][i], *out});
      if (const auto in = input_of(a, s, l)) {
        const double t = produced.at(producer(*in, s));
        size_t b = 0;
        while (start[s][b] < t)
          ++b;
        at[b].push_back({t, *in});
      }
    }
    ProgramBuilder builder;
    for (size_t i = 0; i <= n; ++i) {
      std::stable_sort(at[i].begin(), at[i].end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      std::vector<Transfer> x;
      for (const auto& tt : at[i])
        x.push_back(tt.second);
      builder.exchange(std::move(x));
      if (i < n) builder.action(orders[s][i]);
    }
    programs[s] = builder.take();
  }
  return programs;
}

// zb-h1's programs for `costs`: the fixed order and both list schedules, each with its
// transfers placed by the unit timeline and by the costed one, simulated under `costs`; the
// shortest iteration wins (the fixed order on ties, so equal costs give the textbook schedule).
std::vector<std::vector<Step>> zb_h1_programs(int p, int m, const ActionCosts& costs) {
  const Layout l{p, 1};
  std::vector<std::vector<Action>> fixed;
  for (int s = 0; s < p; ++s)
    fixed.push_back(zb_h1_order(s, p, m));
  const std::vector<std::vector<std::vector<Action>>> orders = {
      fixed, zb_h1_listed(p, m, costs, false), zb_h1_listed(p, m, costs, true)};
  std::vector<std::vector<Step>> best;
  double best_makespan = std::numeric_limits<double>::infinity();
  for (const auto& order : orders)
    for (const ActionCosts& placement : {ActionCosts{1, 2, 1, 1, 0}, costs}) {
      std::vector<std::vector<Step>> programs = timeline_programs(order, l, placement);
      const Simulation sim = simulate_pipeline(programs, costs);
      if (!sim.deadlocked && sim.makespan < best_makespan * (1 - 1e-12)) {
        best_makespan = sim.makespan;
        best = std::move(programs);
      }
    }
  RIDGELINE_REQUIRE(!best.empty(), "no zb-h1 program completes");
  return best;
}

std::string str(int64_t v) {
  return std::to_string(v);
}

// Every problem that does not depend on the layer count.
std::vector<std::string> order_problems(const Schedule& sc, int p, int m, bool train) {
  std::vector<std::string> out;
  const std::string flag = "--schedule " + schedule_name(sc);
  if (p < 1) out.push_back("--pp must be positive (got " + str(p) + ")");
  if (m < 1) out.push_back("--microbatches must be >= 1 (got " + str(m) + ")");
  if (sc.kind == ScheduleKind::interleaved && sc.chunks < 2)
    out.push_back(flag + " needs at least 2 model chunks per stage (interleaved:V, V >= 2)");
  if (sc.kind != ScheduleKind::interleaved && sc.chunks != 1)
    out.push_back(flag + " has one model chunk per stage (got " + str(sc.chunks) + ")");
  if (!out.empty()) return out;
  if (sc.kind == ScheduleKind::zb_h1 && !train)
    out.push_back(flag +
                  " splits the backward pass: it needs --phase train (forward only, use 1f1b)");
  if (sc.kind == ScheduleKind::interleaved && p < 2)
    out.push_back(flag + " needs --pp 2 or more (one stage has no pipeline to interleave)");
  if (sc.kind != ScheduleKind::gpipe && m < p)
    out.push_back(flag + " needs --microbatches >= --pp (got " + str(m) + " < " + str(p) + ")");
  if (sc.kind == ScheduleKind::interleaved && m % p != 0)
    out.push_back(flag + " needs --microbatches " + str(m) + " to be a multiple of --pp " + str(p) +
                  " (microbatches go through the chunks in groups of --pp)");
  return out;
}

// Throws UsageError naming the first of order_problems(), if any.
void require_order(const Schedule& sc, int p, int m, bool train) {
  const std::vector<std::string> problems = order_problems(sc, p, m, train);
  if (!problems.empty()) throw UsageError(problems.front());
}

} // namespace

Schedule parse_schedule(const std::string& text) {
  if (text == "gpipe") return {ScheduleKind::gpipe, 1};
  if (text == "1f1b") return {ScheduleKind::one_f_one_b, 1};
  if (text == "zb-h1") return {ScheduleKind::zb_h1, 1};
  const std::string prefix = "interleaved:";
  if (text.compare(0, prefix.size(), prefix) == 0) {
    const std::string v = text.substr(prefix.size());
    const bool digits = !v.empty() && v.size() <= 6 && std::all_of(v.begin(), v.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    if (digits && std::stoi(v) >= 2) return {ScheduleKind::interleaved, std::stoi(v)};
  }
  throw UsageError("unknown pipeline schedule '" + text + "': expected " + accepted_forms);
}

std::string schedule_name(const Schedule& sc) {
  switch (sc.kind) {
  case ScheduleKind::gpipe:
    return "gpipe";
  case ScheduleKind::one_f_one_b:
    return "1f1b";
  case ScheduleKind::interleaved:
    return "interleaved:" + std::to_string(sc.chunks);
  case ScheduleKind::zb_h1:
    return "zb-h1";
  }
  return "unknown";
}

std::vector<std::string> schedule_problems(const Schedule& sc, int stages, int microbatches,
                                           int64_t layers, bool train) {
  std::vector<std::string> out = order_problems(sc, stages, microbatches, train);
  if (layers < 1) {
    out.push_back("--layers must be positive (got " + str(layers) + ")");
  } else if (stages >= 1 && layers % stages != 0) {
    out.push_back("--layers " + str(layers) + " is not divisible by --pp " + str(stages));
  } else if (stages >= 1 && sc.kind == ScheduleKind::interleaved && sc.chunks >= 2 &&
             layers % (int64_t{stages} * sc.chunks) != 0) {
    out.push_back("--schedule " + schedule_name(sc) + " needs --layers " + str(layers) +
                  " to be a multiple of --pp x V = " + str(int64_t{stages} * sc.chunks) +
                  " (every stage holds V chunks of equal layers)");
  }
  return out;
}

std::vector<Step> stage_program(const Schedule& sc, int stage, int stages, int microbatches,
                                bool train, const ActionCosts& costs) {
  require_order(sc, stages, microbatches, train);
  if (stage < 0 || stage >= stages)
    throw Error("pipeline stage " + str(stage) + " outside 0.." + str(stages - 1));
  const Layout l{stages, sc.chunks};
  switch (sc.kind) {
  case ScheduleKind::gpipe: {
    std::vector<Action> order = forwards(microbatches);
    if (train)
      for (int mb = 0; mb < microbatches; ++mb)
        order.push_back({ActionKind::backward, mb, 0});
    return merged_program(order, stage, l);
  }
  case ScheduleKind::one_f_one_b:
    return merged_program(train
                              ? one_f_one_b_order(stage, stages, microbatches, ActionKind::backward)
                              : forwards(microbatches),
                          stage, l);
  case ScheduleKind::interleaved: {
    if (train) return interleaved_train_program(stage, l, microbatches);
    std::vector<Action> order;
    for (int k = 0; k < microbatches * sc.chunks; ++k)
      order.push_back(interleaved_action(k, stages, sc.chunks, true));
    return merged_program(order, stage, l);
  }
  case ScheduleKind::zb_h1:
    return zb_h1_programs(stages, microbatches, costs)[static_cast<size_t>(stage)];
  }
  throw Error("unknown pipeline schedule kind");
}

std::pair<int64_t, int64_t> chunk_layers(const Schedule& sc, int stage, int stages, int chunk,
                                         int64_t layers) {
  if (stages < 1 || stage < 0 || stage >= stages || chunk < 0 || chunk >= sc.chunks ||
      layers % (int64_t{stages} * sc.chunks) != 0)
    throw Error("chunk_layers: stage " + str(stage) + " chunk " + str(chunk) + " of " +
                str(stages) + " x " + str(sc.chunks) + " over " + str(layers) + " layers");
  const int64_t count = layers / (int64_t{stages} * sc.chunks);
  return {(int64_t{chunk} * stages + stage) * count, count};
}

double theory_bubble(const Schedule& sc, int stages, int microbatches, bool train) {
  const double p = stages, m = microbatches;
  switch (sc.kind) {
  case ScheduleKind::gpipe:
  case ScheduleKind::one_f_one_b:
    return (p - 1) / (m + p - 1);
  case ScheduleKind::interleaved:
    return (p - 1) / (m * sc.chunks + p - 1);
  case ScheduleKind::zb_h1:
    // Busy 3m units per stage; idle p - 1: the forward wave's (p - 1) F plus the backward
    // wave's (p - 1) B, less the (p - 1) W the deferred weight gradients move into it.
    if (!train) throw UsageError("--schedule zb-h1 has no forward-only form");
    return (p - 1) / (3 * m + p - 1);
  }
  return 0;
}

double Simulation::bubble() const {
  const double b = std::accumulate(busy.begin(), busy.end(), 0.0);
  const double i = std::accumulate(idle.begin(), idle.end(), 0.0);
  return b + i > 0 ? i / (b + i) : 0.0;
}

std::vector<int> input_exchanges(const std::vector<Step>& program) {
  std::vector<int> out(program.size(), -1);
  std::map<std::tuple<bool, int, int>, int> received; // (gradient, microbatch, chunk) -> step
  for (size_t i = 0; i < program.size(); ++i) {
    const Step& st = program[i];
    for (const Transfer& t : st.exchange)
      if (!t.send) received[{t.gradient, t.microbatch, t.chunk}] = static_cast<int>(i);
    if (!st.action) continue;
    const Action& a = *st.action;
    const auto key = std::tuple{a.kind != ActionKind::forward, a.microbatch, a.chunk};
    if (a.kind == ActionKind::backward_weight) continue; // its input came with backward_input
    const auto it = received.find(key);
    if (it != received.end()) {
      out[i] = it->second;
      received.erase(it);
    }
  }
  return out;
}

namespace {

// One stage's exchange on its p2p lane: when the compute posted it, when the lane started it and
// when it finished (infinite: not yet known).
struct LaneExchange {
  double posted = std::numeric_limits<double>::infinity();
  double started = std::numeric_limits<double>::infinity();
  double done = std::numeric_limits<double>::infinity();
};

// One transfer as matched by the simulator: the exchange holding it and what it carries.
struct Posted {
  int stage;
  size_t exchange;
  int microbatch;
  int virtual_stage;
};

using ChannelKey = std::tuple<int, int, bool>; // from, to, gradient

} // namespace

Simulation simulate_pipeline(const std::vector<std::vector<Step>>& programs,
                             const ActionCosts& costs) {
  constexpr double unknown = std::numeric_limits<double>::infinity();
  const int p = static_cast<int>(programs.size());
  // Every exchange, the channel position of each of its transfers, and each action's input.
  std::vector<std::vector<LaneExchange>> lanes(p);
  std::vector<std::vector<int>> lane_of_step(p), input(p);
  std::map<ChannelKey, std::pair<std::vector<Posted>, std::vector<Posted>>> channels;
  std::vector<std::vector<std::vector<std::tuple<ChannelKey, bool, size_t>>>> slots(p);
  for (int s = 0; s < p; ++s) {
    input[s] = input_exchanges(programs[s]);
    lane_of_step[s].assign(programs[s].size(), -1);
    for (size_t i = 0; i < programs[s].size(); ++i) {
      if (programs[s][i].exchange.empty()) continue;
      lane_of_step[s][i] = static_cast<int>(lanes[s].size());
      slots[s].emplace_back();
      for (const Transfer& t : programs[s][i].exchange) {
        RIDGELINE_REQUIRE(t.peer_stage >= 0 && t.peer_stage < p,
                          "transfer of stage " + str(s) + " to stage " + str(t.peer_stage));
        const ChannelKey key = t.send ? ChannelKey{s, t.peer_stage, t.gradient}
                                      : ChannelKey{t.peer_stage, s, t.gradient};
        auto& side = t.send ? channels[key].first : channels[key].second;
        side.push_back({s, lanes[s].size(), t.microbatch, t.chunk * p + s});
        slots[s].back().emplace_back(key, t.send, side.size() - 1);
      }
      lanes[s].emplace_back();
    }
  }
  // A matched pair must carry the same microbatch from one virtual stage to the next.
  for (const auto& [key, ch] : channels)
    for (size_t k = 0; k < std::min(ch.first.size(), ch.second.size()); ++k) {
      const Posted& sent = ch.first[k];
      const Posted& received = ch.second[k];
      const int step_by = std::get<2>(key) ? -1 : 1;
      if (sent.microbatch != received.microbatch ||
          received.virtual_stage != sent.virtual_stage + step_by)
        throw Error("pipeline transfer " + str(std::get<0>(key)) + " -> " + str(std::get<1>(key)) +
                    (std::get<2>(key) ? " (gradient)" : "") + " pairs microbatch " +
                    str(sent.microbatch) + " of virtual stage " + str(sent.virtual_stage) +
                    " with microbatch " + str(received.microbatch) + " of virtual stage " +
                    str(received.virtual_stage));
    }

  Simulation sim;
  sim.busy.assign(p, 0);
  std::vector<double> compute(p, 0);
  std::vector<size_t> pc(p, 0), next_exchange(p, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      // The compute: posts exchanges without waiting; an action waits for its input's exchange.
      while (pc[s] < programs[s].size()) {
        const size_t i = pc[s];
        if (const int e = lane_of_step[s][i]; e >= 0) {
          lanes[s][static_cast<size_t>(e)].posted = compute[s];
        } else {
          double ready = compute[s];
          if (const int j = input[s][i]; j >= 0) {
            const double done = lanes[s][static_cast<size_t>(lane_of_step[s][j])].done;
            if (done == unknown) break;
            ready = std::max(ready, done);
          }
          const double d = duration(*programs[s][i].action, costs);
          compute[s] = ready + d;
          sim.busy[s] += d;
        }
        ++pc[s];
        progress = true;
      }
      // The lane: exchanges in program order, each started once posted and the previous one
      // done, finished when the peer exchange of every transfer has started.
      while (next_exchange[s] < lanes[s].size()) {
        const size_t e = next_exchange[s];
        LaneExchange& x = lanes[s][e];
        if (x.posted == unknown) break;
        x.started = std::max(x.posted, e > 0 ? lanes[s][e - 1].done : 0.0);
        double done = x.started;
        bool matched = true;
        for (const auto& [key, send, index] : slots[s][e]) {
          const auto& ch = channels[key];
          const auto& other = send ? ch.second : ch.first;
          const double peer = other.size() > index
                                  ? lanes[other[index].stage][other[index].exchange].started
                                  : unknown;
          if (peer == unknown) {
            matched = false;
            break;
          }
          done = std::max(done, std::max(x.started, peer) + costs.p2p);
        }
        if (!matched) break;
        x.done = done;
        ++next_exchange[s];
        progress = true;
      }
    }
  }
  sim.finish.assign(p, 0);
  for (int s = 0; s < p; ++s) {
    sim.deadlocked =
        sim.deadlocked || pc[s] < programs[s].size() || next_exchange[s] < lanes[s].size();
    sim.finish[s] = compute[s];
    for (const LaneExchange& x : lanes[s])
      if (x.done != unknown) sim.finish[s] = std::max(sim.finish[s], x.done);
  }
  sim.makespan = p > 0 ? *std::max_element(sim.finish.begin(), sim.finish.end()) : 0.0;
  sim.idle.resize(p);
  for (int s = 0; s < p; ++s)
    sim.idle[s] = sim.makespan - sim.busy[s];
  return sim;
}

Simulation simulate_pipeline(const Schedule& sc, int stages, int microbatches, bool train,
                             const ActionCosts& costs) {
  // zb-h1 builds every stage's program at once (its order is chosen by simulating them all):
  // once here, not once per stage.
  if (sc.kind == ScheduleKind::zb_h1) {
    require_order(sc, stages, microbatches, train);
    return simulate_pipeline(zb_h1_programs(stages, microbatches, costs), costs);
  }
  std::vector<std::vector<Step>> programs;
  for (int s = 0; s < stages; ++s)
    programs.push_back(stage_program(sc, s, stages, microbatches, train, costs));
  return simulate_pipeline(programs, costs);
}

int peak_in_flight(const std::vector<Step>& program) {
  // The last backward action of each (microbatch, chunk) releases it.
  std::map<std::pair<int, int>, size_t> release;
  for (size_t i = 0; i < program.size(); ++i)
    if (program[i].action && program[i].action->kind != ActionKind::forward)
      release[{program[i].action->microbatch, program[i].action->chunk}] = i;
  int held = 0, peak = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    if (!program[i].action) continue;
    const Action& a = *program[i].action;
    const std::pair<int, int> key{a.microbatch, a.chunk};
    if (a.kind == ActionKind::forward) {
      peak = std::max(peak, ++held);
      if (release.count(key) == 0) --held;
    } else if (release.at(key) == i) {
      --held;
    }
  }
  return peak;
}

} // namespace ridgeline
