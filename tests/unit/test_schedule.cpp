// Pipeline schedules: parsing and validation, the structure of every stage's program (each action
// once, forward before backward before weight gradient, receives before use, sends after their
// action, transfers pairing across stages), the simulated bubble against the theory, the peak of
// held activations, the chunk layout, and the simulator catching a deadlock.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "parallel/schedule.hpp"

namespace ridgeline {
namespace {

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
  for (const std::string& p : problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

struct Case {
  Schedule schedule;
  int stages;
  int microbatches;
  bool train;
};

std::string describe(const Case& c) {
  return schedule_name(c.schedule) + " p=" + std::to_string(c.stages) +
         " m=" + std::to_string(c.microbatches) + (c.train ? " train" : " forward");
}

// Every schedule, p in 1..4, m in {p, 2p, 8}, train and forward only, where valid.
std::vector<Case> valid_cases() {
  std::vector<Case> out;
  for (const char* name : {"gpipe", "1f1b", "interleaved:2", "interleaved:3", "zb-h1"})
    for (int p = 1; p <= 4; ++p)
      for (int m : std::set<int>{p, 2 * p, 8})
        for (bool train : {true, false}) {
          const Schedule s = parse_schedule(name);
          if (schedule_problems(s, p, m, int64_t{p} * s.chunks, train).empty())
            out.push_back({s, p, m, train});
        }
  return out;
}

std::vector<std::vector<Step>> programs_of(const Case& c) {
  std::vector<std::vector<Step>> out;
  for (int s = 0; s < c.stages; ++s)
    out.push_back(stage_program(c.schedule, s, c.stages, c.microbatches, c.train));
  return out;
}

TEST(Schedule, ParseAndNameRoundTrip) {
  for (const char* text : {"gpipe", "1f1b", "interleaved:2", "interleaved:4", "zb-h1"})
    EXPECT_EQ(schedule_name(parse_schedule(text)), text);
  const Schedule s = parse_schedule("interleaved:3");
  EXPECT_EQ(s.kind, ScheduleKind::interleaved);
  EXPECT_EQ(s.chunks, 3);
  EXPECT_EQ(parse_schedule("zb-h1").kind, ScheduleKind::zb_h1);
  EXPECT_EQ(parse_schedule("1f1b").chunks, 1);
}

TEST(Schedule, BadTextsAreRefused) {
  for (const char* text : {"", "GPipe", "1F1B", "zb", "zbh1", "interleaved", "interleaved:",
                           "interleaved:1", "interleaved:0", "interleaved:-2", "interleaved:x",
                           "interleaved:2x", "interleaved: 2", "1f1b ", "interleaved:99999999"}) {
    try {
      parse_schedule(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("gpipe, 1f1b, interleaved:V"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Schedule, ProblemsNameTheirFlags) {
  const Schedule gpipe = parse_schedule("gpipe"), one = parse_schedule("1f1b"),
                 zb = parse_schedule("zb-h1"), il = parse_schedule("interleaved:2");
  EXPECT_TRUE(schedule_problems(gpipe, 4, 2, 8, true).empty()); // gpipe takes m < p
  EXPECT_TRUE(schedule_problems(one, 4, 4, 8, true).empty());
  EXPECT_TRUE(schedule_problems(zb, 4, 5, 8, true).empty());
  EXPECT_TRUE(schedule_problems(il, 4, 8, 16, true).empty());
  EXPECT_TRUE(schedule_problems(il, 4, 8, 16, false).empty());
  for (const Schedule& s : {one, zb, il}) {
    const auto p = schedule_problems(s, 4, 3, 16, true);
    EXPECT_TRUE(mentions(p, "--microbatches >= --pp")) << schedule_name(s);
  }
  EXPECT_TRUE(mentions(schedule_problems(il, 4, 6, 16, true), "multiple of --pp 4"));
  EXPECT_TRUE(mentions(schedule_problems(il, 4, 8, 12, true), "--pp x V = 8"));
  EXPECT_TRUE(schedule_problems(il, 4, 8, 12, true).size() == 1);
  EXPECT_TRUE(mentions(schedule_problems(one, 4, 8, 6, true), "--layers 6 is not divisible"));
  EXPECT_TRUE(mentions(schedule_problems(il, 4, 8, 6, true), "--layers 6 is not divisible"));
  EXPECT_TRUE(mentions(schedule_problems(zb, 4, 8, 8, false), "--phase train"));
  EXPECT_TRUE(mentions(schedule_problems(il, 1, 2, 4, true), "--pp 2 or more"));
  EXPECT_TRUE(mentions(schedule_problems(gpipe, 2, 0, 4, true), "--microbatches must be"));
  EXPECT_TRUE(mentions(schedule_problems(gpipe, 2, 2, 0, true), "--layers must be"));
  EXPECT_TRUE(mentions(schedule_problems(Schedule{ScheduleKind::interleaved, 1}, 2, 2, 4, true),
                       "at least 2 model chunks"));
  EXPECT_THROW(stage_program(one, 0, 4, 3, true), UsageError);
  EXPECT_THROW(stage_program(zb, 0, 2, 2, false), UsageError);
  EXPECT_THROW(stage_program(one, 4, 4, 4, true), Error);
}

// What a stage's program must hold, read from the program alone.
void check_stage(const Case& c, int stage, const std::vector<Step>& program) {
  SCOPED_TRACE(describe(c) + " stage " + std::to_string(stage));
  const int p = c.stages, V = c.schedule.chunks;
  const bool split = c.schedule.kind == ScheduleKind::zb_h1;
  std::map<std::tuple<ActionKind, int, int>, int> count, position;
  // Received and not yet used: (gradient, microbatch, chunk).
  std::multiset<std::tuple<bool, int, int>> received;
  std::set<std::tuple<bool, int, int>> produced, sent;
  for (size_t i = 0; i < program.size(); ++i) {
    const Step& st = program[i];
    ASSERT_NE(st.exchange.empty(), !st.action) << "step " << i;
    for (const Transfer& t : st.exchange) {
      const int v = t.chunk * p + stage;
      EXPECT_EQ(t.peer_stage, t.send != t.gradient ? (stage + 1) % p : (stage + p - 1) % p);
      EXPECT_TRUE(t.send != t.gradient ? v < p * V - 1 : v > 0) << "transfer past the pipe";
      const auto key = std::tuple{t.gradient, t.microbatch, t.chunk};
      if (t.send) {
        EXPECT_TRUE(produced.count(key)) << "send before its action, mb " << t.microbatch;
        EXPECT_TRUE(sent.insert(key).second) << "sent twice";
      } else {
        received.insert(key);
      }
    }
    if (!st.action) continue;
    const Action& a = *st.action;
    const int v = a.chunk * p + stage;
    ++count[{a.kind, a.microbatch, a.chunk}];
    position[{a.kind, a.microbatch, a.chunk}] = static_cast<int>(i);
    const bool bwd = a.kind == ActionKind::backward || a.kind == ActionKind::backward_input;
    if ((a.kind == ActionKind::forward && v > 0) || (bwd && v < p * V - 1)) {
      const auto key = std::tuple{bwd, a.microbatch, a.chunk};
      auto it = received.find(key);
      ASSERT_NE(it, received.end())
          << "input not received before the action, mb " << a.microbatch << " chunk " << a.chunk;
      received.erase(it);
    }
    if (a.kind == ActionKind::forward || bwd) produced.insert({bwd, a.microbatch, a.chunk});
  }
  EXPECT_TRUE(received.empty()) << "received and never used";
  std::vector<ActionKind> kinds{ActionKind::forward};
  if (c.train) {
    if (split)
      kinds.insert(kinds.end(), {ActionKind::backward_input, ActionKind::backward_weight});
    else
      kinds.push_back(ActionKind::backward);
  }
  size_t expected = 0;
  for (ActionKind k : kinds)
    for (int mb = 0; mb < c.microbatches; ++mb)
      for (int ch = 0; ch < V; ++ch) {
        EXPECT_EQ((count[{k, mb, ch}]), 1) << "kind " << int(k) << " mb " << mb << " chunk " << ch;
        ++expected;
      }
  size_t total = 0;
  for (const auto& kv : count)
    total += kv.second;
  EXPECT_EQ(total, expected) << "unexpected actions";
  for (int mb = 0; mb < c.microbatches && c.train; ++mb)
    for (int ch = 0; ch < V; ++ch) {
      const int f = position[{ActionKind::forward, mb, ch}];
      if (split) {
        const int b = position[{ActionKind::backward_input, mb, ch}];
        EXPECT_LT(f, b);
        EXPECT_LT(b, (position[{ActionKind::backward_weight, mb, ch}]));
      } else {
        EXPECT_LT(f, (position[{ActionKind::backward, mb, ch}]));
      }
    }
}

TEST(Schedule, EveryProgramIsComplete) {
  const std::vector<Case> cases = valid_cases();
  ASSERT_GT(cases.size(), 50u);
  for (const Case& c : cases) {
    const auto programs = programs_of(c);
    for (int s = 0; s < c.stages; ++s)
      check_stage(c, s, programs[s]);
  }
}

// The k-th send on each (from, to, kind) pairs with the k-th receive there: same microbatch,
// receiver on the next virtual stage (activations) or the previous one (gradients).
TEST(Schedule, SendsAndReceivesPairUp) {
  for (const Case& c : valid_cases()) {
    SCOPED_TRACE(describe(c));
    const int p = c.stages;
    std::map<std::tuple<int, int, bool>, std::vector<std::pair<int, int>>> sends, receives;
    const auto programs = programs_of(c);
    for (int s = 0; s < p; ++s)
      for (const Step& st : programs[s])
        for (const Transfer& t : st.exchange) {
          const std::pair<int, int> what{t.microbatch, t.chunk * p + s};
          if (t.send)
            sends[{s, t.peer_stage, t.gradient}].push_back(what);
          else
            receives[{t.peer_stage, s, t.gradient}].push_back(what);
        }
    EXPECT_EQ(sends.size(), receives.size());
    for (const auto& [key, list] : sends) {
      const auto& other = receives[key];
      ASSERT_EQ(list.size(), other.size());
      const int step = std::get<2>(key) ? -1 : 1;
      for (size_t i = 0; i < list.size(); ++i) {
        EXPECT_EQ(list[i].first, other[i].first);
        EXPECT_EQ(list[i].second + step, other[i].second);
      }
    }
    const Simulation sim = simulate_pipeline(programs_of(c), ActionCosts{});
    EXPECT_FALSE(sim.deadlocked);
  }
}

TEST(Schedule, SimulatedBubbleMatchesTheory) {
  const ActionCosts equal{1, 1, 1, 1, 0}, heavy_backward{1, 2, 1, 1, 0};
  for (const Case& c : valid_cases()) {
    SCOPED_TRACE(describe(c));
    const double theory = theory_bubble(c.schedule, c.stages, c.microbatches, c.train);
    const Simulation sim = simulate_pipeline(c.schedule, c.stages, c.microbatches, c.train, equal);
    ASSERT_FALSE(sim.deadlocked);
    EXPECT_NEAR(sim.bubble(), theory, 1e-9);
    if (c.schedule.kind != ScheduleKind::zb_h1) {
      // The bubble fraction does not depend on the ratio of backward to forward time.
      const Simulation heavy =
          simulate_pipeline(c.schedule, c.stages, c.microbatches, c.train, heavy_backward);
      EXPECT_NEAR(heavy.bubble(), theory, 1e-9);
    }
    if (c.stages == 1) {
      EXPECT_EQ(sim.bubble(), 0.0);
    }
  }
}

TEST(Schedule, LargerPipelinesStayExact) {
  const ActionCosts equal{1, 1, 1, 1, 0};
  for (int p = 5; p <= 8; ++p)
    for (int m : {p, 2 * p, 3 * p})
      for (const char* name :
           {"gpipe", "1f1b", "interleaved:2", "interleaved:3", "interleaved:4", "zb-h1"}) {
        const Schedule s = parse_schedule(name);
        SCOPED_TRACE(describe({s, p, m, true}));
        const Simulation sim = simulate_pipeline(s, p, m, true, equal);
        ASSERT_FALSE(sim.deadlocked);
        EXPECT_NEAR(sim.bubble(), theory_bubble(s, p, m, true), 1e-9);
      }
}

TEST(Schedule, ZeroBubbleBeatsOneFOneB) {
  const ActionCosts costs{}; // backward = backward_input + backward_weight
  for (int p = 2; p <= 4; ++p)
    for (int m : {p, 2 * p, 8}) {
      const double zb = simulate_pipeline(parse_schedule("zb-h1"), p, m, true, costs).bubble();
      const double one = simulate_pipeline(parse_schedule("1f1b"), p, m, true, costs).bubble();
      EXPECT_LT(zb, one) << "p=" << p << " m=" << m;
      EXPECT_NEAR(one, theory_bubble(parse_schedule("1f1b"), p, m, true), 1e-9);
      // Same busy time per stage: 1f1b's iteration is (m + p - 1)(F + B), zb-h1's 3m + p - 1.
      EXPECT_DOUBLE_EQ(simulate_pipeline(parse_schedule("zb-h1"), p, m, true, costs).makespan,
                       3.0 * m + p - 1);
    }
}

// Action times far from equal (as measured: weight gradients cheaper than forwards, or dearer):
// zb-h1's order is built for them, and its bubble stays below 1f1b's (whose backward is the two
// halves together) with the same memory bound.
TEST(Schedule, ZeroBubbleBeatsOneFOneBAtMeasuredCosts) {
  const ActionCosts measured[] = {{1.67, 2.89, 1.79, 1.10, 0},
                                  {1, 1.3, 1, 0.3, 0},
                                  {2, 1.5, 1, 0.5, 0},
                                  {1, 3, 1, 2, 0},
                                  {1, 1.7, 1.5, 0.2, 0.05}};
  for (const ActionCosts& c : measured)
    for (int p = 2; p <= 8; p *= 2)
      for (int m : {p, 2 * p, 16}) {
        SCOPED_TRACE("F " + std::to_string(c.forward) + " B " + std::to_string(c.backward_input) +
                     " W " + std::to_string(c.backward_weight) + " p=" + std::to_string(p) +
                     " m=" + std::to_string(m));
        const Simulation zb = simulate_pipeline(parse_schedule("zb-h1"), p, m, true, c);
        const Simulation one = simulate_pipeline(parse_schedule("1f1b"), p, m, true, c);
        ASSERT_FALSE(zb.deadlocked);
        EXPECT_LT(zb.makespan, one.makespan);
        EXPECT_LT(zb.bubble(), one.bubble());
        for (int s = 0; s < p; ++s) {
          const std::vector<Step> program =
              stage_program(parse_schedule("zb-h1"), s, p, m, true, c);
          check_stage({parse_schedule("zb-h1"), p, m, true}, s, program);
          EXPECT_LE(peak_in_flight(program), p);
        }
      }
}

TEST(Schedule, PeakActivationsInFlight) {
  for (int p = 1; p <= 4; ++p)
    for (int m : {p, 2 * p, 8}) {
      for (int s = 0; s < p; ++s) {
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " s=" + std::to_string(s));
        const int one = peak_in_flight(stage_program(parse_schedule("1f1b"), s, p, m, true));
        EXPECT_LE(one, p - s);
        EXPECT_EQ(one, std::min(p - s, m));
        EXPECT_EQ(peak_in_flight(stage_program(parse_schedule("gpipe"), s, p, m, true)), m);
        // zb-h1 holds up to p on every stage: 1f1b's peak, that of its first stage.
        EXPECT_EQ(peak_in_flight(stage_program(parse_schedule("zb-h1"), s, p, m, true)),
                  std::min(p, m));
        EXPECT_EQ(peak_in_flight(stage_program(parse_schedule("gpipe"), s, p, m, false)), 1);
      }
    }
  // Interleaved: Megatron's warm-up plus the steady state's one, in (microbatch, chunk) pairs.
  EXPECT_EQ(peak_in_flight(stage_program(parse_schedule("interleaved:2"), 0, 4, 8, true)),
            2 * 3 + 4 + 1);
  EXPECT_EQ(peak_in_flight(stage_program(parse_schedule("interleaved:2"), 3, 4, 8, true)), 4 + 1);
}

TEST(Schedule, ChunkLayout) {
  EXPECT_EQ(chunk_layers(parse_schedule("1f1b"), 2, 4, 0, 8), (std::pair<int64_t, int64_t>{4, 2}));
  const Schedule il = parse_schedule("interleaved:2");
  // Virtual stage c * p + s: stage 1's chunk 1 is virtual stage 5 of 8.
  EXPECT_EQ(chunk_layers(il, 1, 4, 1, 16), (std::pair<int64_t, int64_t>{10, 2}));
  EXPECT_EQ(chunk_layers(il, 3, 4, 0, 16), (std::pair<int64_t, int64_t>{6, 2}));
  // The chunks of all stages tile the model once.
  std::vector<int> covered(24, 0);
  const Schedule il3 = parse_schedule("interleaved:3");
  for (int s = 0; s < 4; ++s)
    for (int c = 0; c < 3; ++c) {
      const auto [first, n] = chunk_layers(il3, s, 4, c, 24);
      for (int64_t l = first; l < first + n; ++l)
        ++covered[l];
    }
  for (int n : covered)
    EXPECT_EQ(n, 1);
  EXPECT_THROW(chunk_layers(il, 0, 4, 2, 16), Error);
  EXPECT_THROW(chunk_layers(il, 0, 4, 0, 12), Error);
}

TEST(Schedule, TheoryBubbleValues) {
  EXPECT_DOUBLE_EQ(theory_bubble(parse_schedule("gpipe"), 4, 8, true), 3.0 / 11);
  EXPECT_DOUBLE_EQ(theory_bubble(parse_schedule("1f1b"), 4, 8, false), 3.0 / 11);
  EXPECT_DOUBLE_EQ(theory_bubble(parse_schedule("interleaved:2"), 4, 8, true), 3.0 / 19);
  EXPECT_DOUBLE_EQ(theory_bubble(parse_schedule("zb-h1"), 4, 8, true), 3.0 / 27);
  EXPECT_THROW(theory_bubble(parse_schedule("zb-h1"), 4, 8, false), UsageError);
}

Step send(bool gradient, int peer, int mb) {
  return Step{{Transfer{true, gradient, peer, mb, 0}}, {}};
}
Step recv(bool gradient, int peer, int mb) {
  return Step{{Transfer{false, gradient, peer, mb, 0}}, {}};
}
Step act(ActionKind k, int mb) {
  return Step{{}, Action{k, mb, 0}};
}

TEST(Schedule, SimulatorCatchesADeadlock) {
  // Both stages send first, each in its own exchange: a rendezvous send waits for a receive the
  // peer posts only after its own send completed.
  const std::vector<std::vector<Step>> crossed{{send(false, 1, 0), recv(true, 1, 0)},
                                               {send(true, 0, 0), recv(false, 0, 0)}};
  Simulation sim = simulate_pipeline(crossed, ActionCosts{});
  EXPECT_TRUE(sim.deadlocked);
  // The same transfers merged into one exchange per stage complete.
  const std::vector<std::vector<Step>> merged{
      {Step{{Transfer{true, false, 1, 0, 0}, Transfer{false, true, 1, 0, 0}}, {}}},
      {Step{{Transfer{true, true, 0, 0, 0}, Transfer{false, false, 0, 0, 0}}, {}}}};
  sim = simulate_pipeline(merged, ActionCosts{});
  EXPECT_FALSE(sim.deadlocked);
}

TEST(Schedule, SimulatorRefusesMismatchedPairs) {
  const std::vector<std::vector<Step>> wrong{{act(ActionKind::forward, 0), send(false, 1, 0)},
                                             {recv(false, 0, 1), act(ActionKind::forward, 1)}};
  EXPECT_THROW(simulate_pipeline(wrong, ActionCosts{}), Error);
}

TEST(Schedule, TransferLatency) {
  ActionCosts costs;
  costs.p2p = 0.5;
  // Stage 0 forwards [0, 1], the activation arrives at 1.5, stage 1 forwards [1.5, 2.5].
  const Simulation sim = simulate_pipeline(parse_schedule("gpipe"), 2, 1, false, costs);
  EXPECT_DOUBLE_EQ(sim.makespan, 2.5);
  EXPECT_DOUBLE_EQ(sim.busy[0], 1.0);
  EXPECT_DOUBLE_EQ(sim.idle[0], 1.5);
  EXPECT_DOUBLE_EQ(sim.finish[0], 1.5); // its send completes with the receive
  EXPECT_NEAR(sim.bubble(), 3.0 / 5, 1e-12);
}

} // namespace
} // namespace ridgeline
