// The overlap strategies' registry: every form it lists parses back to itself, the refusal
// names every form, and the flags the executors' checks read are the registry's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "parallel/overlap.hpp"
#include "parallel/overlap_policy.hpp"

namespace ridgeline {
namespace {

TEST(OverlapRegistry, EveryFormParsesBackToItsName) {
  for (const char* text : {"none", "async", "chunked:2", "chunked:16", "split:3", "ce-ring",
                           "ce-ring:2", "symm:none", "symm:async", "symm:chunked:4"})
    EXPECT_EQ(parse_overlap(text).name(), text);
  EXPECT_EQ(parse_overlap("chunked:02").name(), "chunked:2");
  // Every registry row parses from its word (with a degree where it needs one).
  for (const OverlapForm& f : overlap_forms()) {
    const std::string text =
        std::string(f.word) + (f.degree == OverlapForm::Degree::required ? ":2" : "");
    EXPECT_EQ(parse_overlap(text).kind, f.kind) << text;
    EXPECT_EQ(&overlap_form(f.kind), &f);
  }
}

TEST(OverlapRegistry, RefusesWhatNoRowAccepts) {
  for (const char* bad : {"", "sideways", "none:2", "async:4", "chunked", "chunked:1", "chunked:x",
                          "split:", "split:12345", "ce-ring:1", "symm:", "symm:split:2",
                          "symm:ce-ring", "symm:symm:none"}) {
    try {
      parse_overlap(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find(overlap_forms_text()), std::string::npos) << what;
    }
  }
  EXPECT_EQ(overlap_forms_text(),
            "none, async, chunked:K (K >= 2), split:N (N >= 2), ce-ring, ce-ring:K (K >= 2), "
            "symm:none, symm:async, symm:chunked:K");
}

TEST(OverlapRegistry, HelpAndExecutorFlagsComeFromTheRows) {
  const std::string help = overlap_help();
  for (const OverlapForm& f : overlap_forms()) {
    EXPECT_NE(help.find(f.word), std::string::npos) << f.word;
    EXPECT_NE(help.find(f.summary), std::string::npos) << f.word;
  }
  std::vector<std::string> scheduled, captured;
  for (const OverlapForm& f : overlap_forms()) {
    if (f.scheduled_ok) scheduled.emplace_back(f.word);
    if (f.graphs_ok) captured.emplace_back(f.word);
  }
  EXPECT_EQ(scheduled, (std::vector<std::string>{"none", "async", "chunked", "split", "ce-ring"}));
  EXPECT_EQ(scheduled_forms_text(), "none, async, chunked:K, split:N, ce-ring, ce-ring:K, "
                                    "symm:none, symm:async, symm:chunked:K");
  EXPECT_EQ(captured, (std::vector<std::string>{"none", "async", "chunked", "split"}));
  EXPECT_EQ(parse_overlap("split:4").parts(), 4);
  EXPECT_EQ(parse_overlap("chunked:4").chunks(), 4);
  EXPECT_EQ(parse_overlap("ce-ring:3").ring_subpieces(), 3);
  EXPECT_EQ(parse_overlap("ce-ring").ring_subpieces(), 1);
}

TEST(OverlapPolicy, EachStrategyCutsItsSitesAndPicksItsLane) {
  const OverlapPolicy none = overlap_policy(parse_overlap("none"));
  EXPECT_EQ(none.units(), 1);
  EXPECT_EQ(none.queue, Lane::compute);
  EXPECT_EQ(overlap_policy(parse_overlap("async")).queue, Lane::comm);
  const OverlapPolicy chunked = overlap_policy(parse_overlap("chunked:3"));
  EXPECT_EQ(chunked.chunks, 3);
  EXPECT_EQ(chunked.parts, 1);
  const OverlapPolicy split = overlap_policy(parse_overlap("split:2"));
  EXPECT_EQ(split.parts, 2);
  EXPECT_EQ(split.units(), 2);
  const OverlapPolicy symm = overlap_policy(parse_overlap("symm:chunked:2"));
  EXPECT_TRUE(symm.symmetric);
  EXPECT_EQ(symm.chunks, 2);
  EXPECT_EQ(symm.queue, Lane::comm);
  EXPECT_EQ(overlap_policy(parse_overlap("symm:none")).queue, Lane::compute);
  const OverlapPolicy ring = overlap_policy(parse_overlap("ce-ring:2"));
  EXPECT_TRUE(ring.ring);
  EXPECT_EQ(ring.ring_subpieces, 2);
  EXPECT_EQ(ring.units(), 1);
}

// The order in which a site issues its calls: each row-parallel unit's GEMM then its
// reduction; the first all-gather, then per unit a wait, the next gather and the GEMM.
TEST(OverlapPolicy, SitesIssueTheirUnitsInOrder) {
  const OverlapPolicy chunked = overlap_policy(parse_overlap("chunked:3"));
  std::string calls;
  row_site(
      chunked, 1,
      [&](int u, bool beside) { calls += "g" + std::to_string(u) + (beside ? "+ " : " "); },
      [&](int u) { calls += "r" + std::to_string(u) + " "; });
  EXPECT_EQ(calls, "g3 r3 g4+ r4 g5+ r5 ");
  calls.clear();
  column_site(
      chunked, 0, [&](int u) { calls += "a" + std::to_string(u) + " "; }, [&] { calls += "w "; },
      [&](int u, bool beside) { calls += "g" + std::to_string(u) + (beside ? "+ " : " "); });
  EXPECT_EQ(calls, "a0 w a1 g0+ w a2 g1+ w g2 ");
  // split: each part's one unit; its GEMMs run beside the other parts' collectives.
  calls.clear();
  row_site(
      overlap_policy(parse_overlap("split:2")), 1,
      [&](int u, bool beside) { calls += "g" + std::to_string(u) + (beside ? "+ " : " "); },
      [&](int u) { calls += "r" + std::to_string(u) + " "; });
  EXPECT_EQ(calls, "g1+ r1 ");
}

TEST(OverlapPolicy, TheTrainStageSplitsWholeSequencesOnly) {
  LayerShape s;
  s.batch = 1;
  s.seq = 16;
  const Overlap split = parse_overlap("split:2");
  EXPECT_TRUE(stage_split_problems(s, split, StageExecutor::forward).empty());
  const std::vector<std::string> train = stage_split_problems(s, split, StageExecutor::train);
  ASSERT_EQ(train.size(), 1u);
  EXPECT_NE(train[0].find("whole sequences"), std::string::npos) << train[0];
  s.batch = 4;
  EXPECT_TRUE(stage_split_problems(s, split, StageExecutor::train).empty());
}

} // namespace
} // namespace ridgeline
