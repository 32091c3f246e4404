// A mixed step moved along its prefill share (--prefill-share): the share -> mix arithmetic
// token for token, the share's text, its checks, the step it builds from the options, and the
// sweep axis it is (its value in rows and tables, and crossovers along it).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "app/config_mixed.hpp"
#include "app/sweep.hpp"
#include "models/serving.hpp"

namespace ridgeline {
namespace {

TEST(PrefillShare, SplitsTheTokensRoundingHalvesUp) {
  // 20 tokens (2 chunks of 8 and 4 decode tokens in the options) over 2 prefill sequences.
  struct Case {
    double share;
    int64_t prefill, decode;
    std::vector<int64_t> chunks;
  };
  const Case cases[] = {
      {0, 0, 20, {}},           // decode tokens only
      {1, 20, 0, {10, 10}},     // chunks only
      {0.5, 10, 10, {5, 5}},    // even
      {0.25, 5, 15, {3, 2}},    // the first chunk one token longer
      {0.125, 3, 17, {2, 1}},   // 2.5 rounds up
      {0.1, 2, 18, {1, 1}},     // a token a sequence
      {0.05, 1, 19, {1}},       // fewer tokens than sequences: a sequence per token
      {0.024, 0, 20, {}},       // 0.48 rounds down
      {0.8, 16, 4, {8, 8}},     // the options' own mix
      {0.9999, 20, 0, {10, 10}} // 19.998 rounds up
  };
  for (const Case& c : cases) {
    const ShareMix m = prefill_share_mix(20, 2, c.share);
    EXPECT_EQ(m.prefill_tokens, c.prefill) << c.share;
    EXPECT_EQ(m.decode_tokens, c.decode) << c.share;
    EXPECT_EQ(m.chunks, c.chunks) << c.share;
  }
  // The share is taken to 1e-6 in integers: 0.333333 x 3 is 0.999999 (1 token), 0.166667 x 3
  // 0.500001 (1 token), 0.166666 x 3 0.499998 (none).
  EXPECT_EQ(prefill_share_mix(3, 1, 0.333333).prefill_tokens, 1);
  EXPECT_EQ(prefill_share_mix(3, 1, 0.166667).prefill_tokens, 1);
  EXPECT_EQ(prefill_share_mix(3, 1, 0.166666).prefill_tokens, 0);
  // Exact halves round up however the product rounds in floating point (0.15 x 10 = 1.5).
  EXPECT_EQ(prefill_share_mix(10, 4, 0.15).prefill_tokens, 2);
  EXPECT_EQ(prefill_share_mix(10, 4, 0.45).prefill_tokens, 5);
  // 7 prefill tokens over three sequences: 3 + 2 + 2.
  EXPECT_EQ(prefill_share_mix(14, 3, 0.5).chunks, (std::vector<int64_t>{3, 2, 2}));
  // No prefill sequence to hold prefill tokens: none are made (mixed_problems refuses it).
  const ShareMix none = prefill_share_mix(20, 0, 0.5);
  EXPECT_EQ(none.prefill_tokens, 10);
  EXPECT_TRUE(none.chunks.empty());
}

TEST(PrefillShare, TextAndChecks) {
  EXPECT_EQ(share_text(0), "0");
  EXPECT_EQ(share_text(1), "1");
  EXPECT_EQ(share_text(0.25), "0.25");
  EXPECT_EQ(share_text(1.0 / 3), "0.333333");
  EXPECT_EQ(share_text(0.0000004), "0");
  EXPECT_EQ(share_text(0.4999996), "0.5");
  std::string canonical;
  for (const auto& [item, want] :
       {std::pair{"0.50", "0.5"}, std::pair{".25", "0.25"}, std::pair{"0", "0"},
        std::pair{"1", "1"}, std::pair{"1.000", "1"}}) {
    EXPECT_EQ(prefill_share_problem(item, canonical), "") << item;
    EXPECT_EQ(canonical, want) << item;
  }
  for (const char* bad : {"-0.1", "1.5", "1.0000001", "nan", "inf", "", " 0.5", "0.5x", "a"}) {
    canonical = "unchanged";
    const std::string problem = prefill_share_problem(bad, canonical);
    EXPECT_NE(problem.find("expected a number from 0 to 1"), std::string::npos) << bad;
    EXPECT_NE(problem.find(std::string("got '") + bad + "'"), std::string::npos) << bad;
    EXPECT_EQ(canonical, "unchanged") << bad;
  }
}

// A mixed configuration of 20 tokens: 2 chunks of 8 after 4 cached tokens, 4 decode tokens.
RunConfig mixed_config() {
  RunConfig c;
  c.phase = "mixed";
  c.hidden = 64;
  c.seq = 64;
  c.context = 10;
  c.prefill_seqs = 2;
  c.chunk = 8;
  c.chunk_context = 4;
  c.decode_batch = 4;
  return c;
}

std::vector<int64_t> entries(const StepMix& mix, EntryKind kind, bool contexts) {
  std::vector<int64_t> out;
  for (const StepEntry& e : mix.entries)
    if (e.kind == kind) out.push_back(contexts ? e.context : e.tokens);
  return out;
}

TEST(PrefillShare, BuildsTheStepFromTheOptions) {
  RunConfig c = mixed_config();
  c.prefill_share = 0.25;
  StepMix mix = mixed_step_of(c);
  EXPECT_EQ(mix.tokens(), 20);
  EXPECT_EQ(entries(mix, EntryKind::prefill, false), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(entries(mix, EntryKind::prefill, true), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(entries(mix, EntryKind::decode, true), std::vector<int64_t>(15, 10));
  // --contexts in turn where the step holds more decode tokens than it lists.
  c.contexts = "5,7,9,11";
  c.prefill_share = 0.1;
  mix = mixed_step_of(c);
  EXPECT_EQ(entries(mix, EntryKind::decode, true),
            (std::vector<int64_t>{5, 7, 9, 11, 5, 7, 9, 11, 5, 7, 9, 11, 5, 7, 9, 11, 5, 7}));
  // --context-dist's first draws, whatever the count.
  c.contexts.clear();
  c.context_dist = "uniform:1:50";
  c.context_seed = 3;
  c.prefill_share = 0;
  EXPECT_EQ(entries(mixed_step_of(c), EntryKind::decode, true),
            ragged_contexts(c.context_dist, 20, 3));
  // Without a share, the options' own mix.
  c.prefill_share = -1;
  mix = mixed_step_of(c);
  EXPECT_EQ(entries(mix, EntryKind::prefill, false), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(entries(mix, EntryKind::decode, true), ragged_contexts(c.context_dist, 4, 3));
  EXPECT_TRUE(mixed_problems(c, {}, true).empty());
}

std::string problems_text(const RunConfig& c) {
  std::string text;
  for (const std::string& p : mixed_problems(c, {}, true))
    text += p + "\n";
  return text;
}

TEST(PrefillShare, RefusesWhatTheStepCannotHold) {
  RunConfig c = mixed_config();
  for (double share : {0.0, 0.5, 1.0}) {
    c.prefill_share = share;
    EXPECT_EQ(problems_text(c), "") << share;
  }
  // Prefill tokens without a sequence to prefill.
  c.prefill_seqs = 0;
  c.decode_batch = 20;
  c.prefill_share = 0.5;
  EXPECT_NE(problems_text(c).find("--prefill-share 0.5 puts 10 token(s) in prefill chunks: give "
                                  "--prefill-seqs >= 1"),
            std::string::npos);
  c.prefill_share = 0; // decode tokens only: nothing to hold
  EXPECT_EQ(problems_text(c), "");
  // A chunk longer than a cache block: 4 cached + 30 (60 tokens over 2 sequences) > 32.
  c = mixed_config();
  c.seq = 32;
  c.decode_batch = 44;
  c.prefill_share = 1;
  EXPECT_NE(problems_text(c).find("--chunk-context 4 + a chunk of 30 tokens (--prefill-share 1) "
                                  "exceed --seq 32"),
            std::string::npos);
  // Not a mixed step.
  c = RunConfig{};
  c.prefill_share = 0.5;
  EXPECT_NE(problems_text(c).find("--prefill-share describe a mixed step: they need --phase mixed"),
            std::string::npos);
}

TEST(PrefillShare, IsASweepAxis) {
  std::string canonical;
  EXPECT_EQ(sweep_axis_item("prefill_share", "0.50", canonical), "");
  EXPECT_EQ(canonical, "0.5");
  EXPECT_NE(sweep_axis_item("prefill_share", "2", canonical), "");
  RunConfig c = mixed_config();
  EXPECT_EQ(sweep_axis_value(c, "prefill_share"), "0.8"); // 16 of 20 tokens
  set_sweep_axis(c, "prefill_share", "0.25");
  EXPECT_EQ(sweep_axis_value(c, "prefill_share"), "0.25");
  c.phase = "decode";
  EXPECT_EQ(sweep_axis_value(c, "prefill_share"), "");
  EXPECT_TRUE(std::isnan(prefill_share_of(c)));
  std::string given[std::size(kSweepAxes)];
  for (size_t a = 0; a < std::size(kSweepAxes); ++a)
    if (kSweepAxes[a] == std::string("prefill_share")) given[a] = ".5,0,1.0";
  std::vector<std::string> lists[std::size(kSweepAxes)], axes;
  split_sweep_axis_lists(given, lists, axes);
  EXPECT_EQ(axes, std::vector<std::string>{"prefill_share"});
  const std::vector<RunConfig> grid = sweep_grid(mixed_config(), lists);
  ASSERT_EQ(grid.size(), 3u);
  EXPECT_EQ(sweep_axis_value(grid[0], "prefill_share"), "0.5");
  EXPECT_EQ(sweep_axis_value(grid[2], "prefill_share"), "1");
}

SweepRow share_row(int64_t point, const std::string& share, double compute, double hbm) {
  SweepRow r;
  r.point = point;
  for (const char* a : kSweepAxes)
    r.axis[a] = "0";
  r.axis["phase"] = "mixed";
  r.axis["prefill_share"] = share;
  r.class_ns[0] = r.class_lo_ns[0] = r.class_hi_ns[0] = compute;
  r.class_ns[1] = r.class_lo_ns[1] = r.class_hi_ns[1] = hbm;
  r.ceiling = compute > hbm ? "compute" : "hbm";
  r.repeats = 3;
  return r;
}

TEST(PrefillShare, TablesAndCrossoversAlongIt) {
  // Given out of order: decode-only HBM-bound, compute taking over between 0.25 and 1.
  const std::vector<SweepRow> rows = {share_row(0, "1", 900, 100), share_row(1, "0", 10, 500),
                                      share_row(2, "0.25", 200, 400)};
  const std::vector<Crossover> c = find_crossovers(rows, {"prefill_share"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind, "compute");
  EXPECT_EQ(c[0].before_value, "0.25");
  EXPECT_EQ(c[0].at_value, "1");
  EXPECT_EQ(c[0].status, "found");
  // The table holds the share as a number, NaN for a point that is no mixed step, and reads
  // back to the same text.
  std::vector<SweepRow> table_rows = rows;
  table_rows.push_back(share_row(3, "", 1, 2));
  const std::vector<SweepRow> back = sweep_rows_from(sweep_points_table(table_rows));
  ASSERT_EQ(back.size(), 4u);
  for (size_t i = 0; i < back.size(); ++i)
    EXPECT_EQ(back[i].axis.at("prefill_share"), table_rows[i].axis.at("prefill_share"));
}

} // namespace
} // namespace ridgeline
