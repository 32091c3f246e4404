// The overlap strategies' registry: every form it lists parses back to itself, the refusal
// names every form, and the flags the executors' checks read are the registry's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "parallel/overlap.hpp"

namespace ridgeline {
namespace {

TEST(OverlapRegistry, EveryFormParsesBackToItsName) {
  for (const std::string& text : {"none", "async", "chunked:2", "chunked:16", "split:3", "ce-ring",
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
  for (const std::string& bad : {"", "sideways", "none:2", "async:4", "chunked", "chunked:1",
                                 "chunked:x", "split:", "split:12345", "ce-ring:1",
                                 "symm:", "symm:split:2", "symm:ce-ring", "symm:symm:none"}) {
    try {
      parse_overlap(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("'" + bad + "'"), std::string::npos) << what;
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
  EXPECT_EQ(scheduled, (std::vector<std::string>{"none", "async"}));
  EXPECT_EQ(captured, (std::vector<std::string>{"none", "async", "chunked", "split"}));
  EXPECT_EQ(parse_overlap("split:4").parts(), 4);
  EXPECT_EQ(parse_overlap("chunked:4").chunks(), 4);
  EXPECT_EQ(parse_overlap("ce-ring:3").ring_subpieces(), 3);
  EXPECT_EQ(parse_overlap("ce-ring").ring_subpieces(), 1);
}

} // namespace
} // namespace ridgeline
