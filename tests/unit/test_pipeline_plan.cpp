// The pipeline driver's plan of a program (parallel/pipeline.hpp), read from the program alone:
// every activation set the program touches is given back exactly once, never before its last
// action, and the sets held at once per chunk cover the program's peak; an action waits only for
// an exchange before it.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>

#include "parallel/pipeline.hpp"

namespace ridgeline {
namespace {

using Set = std::pair<int, int>;

void expect_plan_holds(const std::vector<Step>& program, int chunks, bool train,
                       const std::string& label) {
  SCOPED_TRACE(label);
  const ProgramPlan plan = plan_program(program, chunks, train);
  ASSERT_EQ(plan.wait_for.size(), program.size());
  ASSERT_EQ(plan.release_after.size(), program.size());
  ASSERT_EQ(plan.sets.size(), static_cast<size_t>(chunks));
  std::map<Set, int> released;
  std::map<Set, size_t> last_action;
  std::set<Set> touched;
  for (size_t i = 0; i < program.size(); ++i) {
    const Step& st = program[i];
    for (const Transfer& x : st.exchange)
      touched.insert({x.microbatch, x.chunk});
    if (st.action) {
      touched.insert({st.action->microbatch, st.action->chunk});
      last_action[{st.action->microbatch, st.action->chunk}] = i;
      // The exchange an action waits for comes before it and is one.
      const int w = plan.wait_for[i];
      if (w >= 0) {
        EXPECT_LT(static_cast<size_t>(w), i);
        EXPECT_FALSE(program[static_cast<size_t>(w)].exchange.empty());
        EXPECT_TRUE(plan.waited.count(w));
      }
    }
    for (const Set& s : plan.release_after[i]) {
      ++released[s];
      EXPECT_GE(i, last_action[s])
          << "set (" << s.first << ", " << s.second << ") given back before its last action";
    }
  }
  for (const Set& s : plan.release_at_end)
    ++released[s];
  for (const Set& s : touched)
    EXPECT_EQ(released[s], 1) << "set (" << s.first << ", " << s.second << ")";
  EXPECT_EQ(released.size(), touched.size());
  // Live sets never exceed what the plan reserves per chunk.
  std::vector<int> live(static_cast<size_t>(chunks), 0), peak(static_cast<size_t>(chunks), 0);
  std::set<Set> held;
  for (size_t i = 0; i < program.size(); ++i) {
    auto take = [&](const Set& s) {
      if (held.insert(s).second)
        peak[static_cast<size_t>(s.second)] =
            std::max(peak[static_cast<size_t>(s.second)], ++live[static_cast<size_t>(s.second)]);
    };
    for (const Transfer& x : program[i].exchange)
      take({x.microbatch, x.chunk});
    if (program[i].action) take({program[i].action->microbatch, program[i].action->chunk});
    for (const Set& s : plan.release_after[i]) {
      held.erase(s);
      --live[static_cast<size_t>(s.second)];
    }
  }
  for (int c = 0; c < chunks; ++c)
    EXPECT_GE(plan.sets[static_cast<size_t>(c)], peak[static_cast<size_t>(c)]) << "chunk " << c;
}

TEST(PipelinePlan, EverySetIsGivenBackOnceAfterItsLastAction) {
  for (const char* name : {"gpipe", "1f1b", "interleaved:2", "zb-h1"})
    for (int p : {2, 4})
      for (int m : {p, 2 * p})
        for (bool train : {true, false}) {
          const Schedule schedule = parse_schedule(name);
          if (!schedule_problems(schedule, p, m, 8 * p, train).empty()) continue;
          for (int s = 0; s < p; ++s)
            expect_plan_holds(stage_program(schedule, s, p, m, train), schedule.chunks, train,
                              std::string(name) + " p" + std::to_string(p) + " m" +
                                  std::to_string(m) + " s" + std::to_string(s) +
                                  (train ? " train" : " forward"));
        }
}

TEST(PipelinePlan, GpipeHoldsEveryMicrobatchAnd1f1bItsStagesWorth) {
  // Training: GPipe's first stage runs every forward before any backward; 1F1B's first stage
  // holds as many as there are stages, its last one its own microbatch and the next one, whose
  // receive is posted before this one's backward.
  EXPECT_EQ(plan_program(stage_program(parse_schedule("gpipe"), 0, 4, 8, true), 1, true).sets[0],
            8);
  EXPECT_EQ(plan_program(stage_program(parse_schedule("1f1b"), 0, 4, 8, true), 1, true).sets[0], 4);
  EXPECT_EQ(plan_program(stage_program(parse_schedule("1f1b"), 3, 4, 8, true), 1, true).sets[0], 2);
}

} // namespace
} // namespace ridgeline
