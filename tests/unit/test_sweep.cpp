// The sweep's repeat arithmetic without a run: medians and intervals over repeats, the crossover
// decision against the intervals (found, within noise, measured once), the transport axis
// ordered by measured bandwidth, and the ep axis.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "app/sweep.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

TEST(RepeatedMedian, OneValueHasNoWidth) {
  const Interval i = repeated_median({{5.0}});
  EXPECT_EQ(i.median, 5.0);
  EXPECT_EQ(i.lo, 5.0);
  EXPECT_EQ(i.hi, 5.0);
  const Interval none = repeated_median({{}, {}});
  EXPECT_EQ(none.median, 0.0);
}

TEST(RepeatedMedian, ThreeRepeatsSpanTheirValues) {
  // The median of three draws is 1 with probability 7/27 (above 2.5 %), likewise 3: the 95 %
  // interval is the whole range.
  const Interval i = repeated_median({{3.0}, {1.0}, {2.0}});
  EXPECT_EQ(i.median, 2.0);
  EXPECT_EQ(i.lo, 1.0);
  EXPECT_EQ(i.hi, 3.0);
}

TEST(RepeatedMedian, SameInputSameInterval) {
  const std::vector<std::vector<double>> repeats = {
      {10, 11, 12, 10, 13}, {12, 12, 14, 11, 10}, {9, 10, 11, 12, 10}};
  const Interval a = repeated_median(repeats), b = repeated_median(repeats);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  // The median of the repeats' medians (11, 12, 10).
  EXPECT_EQ(a.median, 11.0);
  EXPECT_LE(a.lo, a.median);
  EXPECT_GE(a.hi, a.median);
  EXPECT_GE(a.lo, 9.0);
  EXPECT_LE(a.hi, 14.0);
}

TEST(RepeatedMedian, Apart) {
  EXPECT_TRUE(apart({5, 4, 6}, {2, 1, 3}));
  EXPECT_TRUE(apart({2, 1, 3}, {5, 4, 6}));
  EXPECT_FALSE(apart({5, 3, 6}, {2, 1, 3}));
}

// A point at tp with its class times (compute, hbm, interconnect, launch), each +-spread, and
// its ceiling the largest.
SweepRow point(int64_t id, int tp, const std::string& transport, std::vector<double> ns,
               double spread, int64_t repeats = 3) {
  SweepRow r;
  r.point = id;
  r.label = "tp=" + std::to_string(tp);
  for (const char* a : kSweepAxes)
    r.axis[a] = "0";
  r.axis["tp"] = std::to_string(tp);
  r.axis["transport"] = transport;
  r.repeats = repeats;
  double largest = -1;
  const char* names[] = {"compute", "hbm", "interconnect", "launch"};
  for (int c = 0; c < 4; ++c) {
    r.class_ns[c] = ns[static_cast<size_t>(c)];
    r.class_lo_ns[c] = r.class_ns[c] - spread;
    r.class_hi_ns[c] = r.class_ns[c] + spread;
    if (r.class_ns[c] > largest) largest = r.class_ns[c], r.ceiling = names[c];
  }
  return r;
}

TEST(SweepCrossovers, FoundBeyondTheIntervals) {
  const std::vector<SweepRow> rows = {point(0, 1, "nvlink", {100, 5000, 2000, 0}, 500),
                                      point(1, 2, "nvlink", {100, 3000, 6000, 0}, 500)};
  const std::vector<Crossover> c = find_crossovers(rows, {"tp"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind, "interconnect");
  EXPECT_EQ(c[0].status, "found");
  EXPECT_EQ(c[0].before_value, "1");
  EXPECT_EQ(c[0].at_value, "2");
  EXPECT_EQ(c[0].rising_ns, 6000);
  EXPECT_EQ(c[0].rising_lo_ns, 5500);
  EXPECT_EQ(c[0].falling_hi_ns, 3500);
  EXPECT_EQ(c[0].note, "interconnect 6.00 us [5.50, 6.50] vs hbm 3.00 us [2.50, 3.50] at tp=2; "
                       "hbm 5.00 us [4.50, 5.50] vs interconnect 2.00 us [1.50, 2.50] at tp=1");
}

TEST(SweepCrossovers, OverlapIsWithinNoise) {
  // At tp=2 interconnect 6000 +-1600 and hbm 3000 +-1600 overlap (4400 < 4600): a tie within
  // noise, not a crossover; tp=4 stays on the interconnect, so nothing else crosses.
  const std::vector<SweepRow> rows = {point(0, 1, "nvlink", {100, 5000, 2000, 0}, 1600),
                                      point(1, 2, "nvlink", {100, 3000, 6000, 0}, 1600),
                                      point(2, 4, "nvlink", {100, 1000, 8000, 0}, 1600)};
  std::vector<Crossover> c = find_crossovers(rows, {"tp"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, "within noise");
  // Measured once: no interval, so not established either.
  std::vector<SweepRow> once = rows;
  for (SweepRow& r : once)
    r.repeats = 1;
  c = find_crossovers(once, {"tp"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, "unrepeated");
}

TEST(SweepCrossovers, TransportOrderedByBandwidth) {
  // One point per transport at tp=2: NVLink keeps it HBM-bound, the host path makes it
  // interconnect-bound. By text, host comes before nvlink and the step would read as the
  // interconnect giving way; by bandwidth the link gets slower and the interconnect takes over.
  const std::vector<SweepRow> rows = {point(0, 2, "host", {100, 3000, 9000, 0}, 200),
                                      point(1, 2, "nvlink", {100, 3000, 1000, 0}, 200)};
  EXPECT_TRUE(find_crossovers(rows, {"transport"}).empty());
  const AxisOrder order = {{"transport", {{"nvlink", 340.0}, {"host", 27.0}}}};
  const std::vector<Crossover> c = find_crossovers(rows, {"transport"}, order);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].before_value, "nvlink");
  EXPECT_EQ(c[0].at_value, "host");
  EXPECT_EQ(c[0].kind, "interconnect");
  EXPECT_EQ(c[0].status, "found");
}

TEST(SweepCrossovers, AlongTheEpDegreeTheAllToAll) {
  // ep orders numerically (16 after 2, where text would put it before) and its interconnect
  // crossover is named as the all-to-all's.
  auto at_ep = [](int64_t id, int ep, std::vector<double> ns) {
    SweepRow r = point(id, 1, "nvlink", std::move(ns), 100);
    r.axis[kEpAxis] = std::to_string(ep);
    r.label = "ep=" + r.axis[kEpAxis];
    return r;
  };
  const std::vector<SweepRow> rows = {at_ep(0, 1, {5000, 1000, 0, 0}),
                                      at_ep(1, 16, {2000, 800, 6000, 0}),
                                      at_ep(2, 2, {4000, 900, 1500, 0})};
  const std::vector<Crossover> c = find_crossovers(rows, {kEpAxis});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].axis, kEpAxis);
  EXPECT_EQ(c[0].before_value, "2");
  EXPECT_EQ(c[0].at_value, "16");
  EXPECT_EQ(c[0].kind, "interconnect");
  EXPECT_EQ(c[0].status, "found");
  std::ostringstream out;
  print_sweep(out, rows, {kEpAxis}, c);
  EXPECT_NE(out.str().find("interconnect (all-to-all) becomes the ceiling between ep=2 and ep=16"),
            std::string::npos)
      << out.str();
  // The column round trip; a file written before the axis has no ep: unknown, not 1.
  Table points = sweep_points_table(rows);
  EXPECT_EQ(sweep_rows_from(points)[1].axis.at(kEpAxis), "16");
  points.erase(std::remove_if(points.begin(), points.end(),
                              [](const Column& col) { return col.name == kEpAxis; }),
               points.end());
  EXPECT_EQ(sweep_rows_from(points)[1].axis.at(kEpAxis), "");
}

TEST(SweepAxes, EpIsAnIntegerDegree) {
  std::string canonical;
  EXPECT_EQ(sweep_axis_item(kEpAxis, "+4", canonical), "");
  EXPECT_EQ(canonical, "4");
  EXPECT_NE(sweep_axis_item(kEpAxis, "0", canonical), "");
  EXPECT_NE(sweep_axis_item(kEpAxis, "4294967296", canonical), ""); // beyond an int
  RunConfig cfg;
  set_sweep_axis(cfg, kEpAxis, "8");
  EXPECT_EQ(cfg.ep, 8);
  EXPECT_EQ(sweep_axis_value(cfg, kEpAxis), "8");
}

TEST(SweepAxes, TpAutoIsTheRanksOfANode) {
  std::string canonical;
  EXPECT_EQ(sweep_axis_item("tp", "auto", canonical), "");
  EXPECT_EQ(canonical, "auto");
  EXPECT_NE(sweep_axis_item("tp", "0", canonical), "");
  EXPECT_NE(sweep_axis_item("batch", "auto", canonical), "");
  RunConfig cfg;
  set_sweep_axis(cfg, "tp", "auto");
  EXPECT_EQ(cfg.tp, 0); // resolved per point, as run's --tp auto
  std::string with_tp[std::size(kSweepAxes)];
  for (size_t a = 0; a < std::size(kSweepAxes); ++a)
    if (kSweepAxes[a] == std::string("tp")) with_tp[a] = "+1,auto";
  std::vector<std::string> lists[std::size(kSweepAxes)], axes;
  split_sweep_axis_lists(with_tp, lists, axes);
  for (size_t a = 0; a < std::size(kSweepAxes); ++a) {
    if (kSweepAxes[a] == std::string("tp")) {
      EXPECT_EQ(lists[a], (std::vector<std::string>{"1", "auto"}));
    }
  }
  EXPECT_EQ(axes, std::vector<std::string>{"tp"});
}

TEST(SweepRepeats, AggregateTakesMediansAndTheLargestClass) {
  std::vector<SweepRepeat> repeats(3);
  const double hbm[] = {5000, 4000, 4500}, interconnect[] = {4800, 4900, 4700};
  for (int i = 0; i < 3; ++i) {
    repeats[static_cast<size_t>(i)].point = 7;
    repeats[static_cast<size_t>(i)].repeat = i;
    repeats[static_cast<size_t>(i)].step_p50_ns = 10000 + i;
    repeats[static_cast<size_t>(i)].class_ns[1] = hbm[i];
    repeats[static_cast<size_t>(i)].class_ns[2] = interconnect[i];
  }
  // A repeat of another point and a failed one count for nothing here.
  repeats.push_back({8, 0, "ok", 1, 1, {9e9, 0, 0, 0}, 0, "compute"});
  repeats.push_back({7, 3, "failed: timeout", 0, 0, {9e9, 0, 0, 0}, 0, "compute"});
  SweepRow row;
  row.point = 7;
  aggregate_repeats(row, repeats, {{10000}, {10001}, {10002}});
  EXPECT_EQ(row.repeats, 3);
  EXPECT_EQ(row.step_p50_ns, 10001);
  EXPECT_EQ(row.step_lo_ns, 10000);
  EXPECT_EQ(row.step_hi_ns, 10002);
  EXPECT_EQ(row.class_ns[1], 4500);
  EXPECT_EQ(row.class_ns[2], 4800);
  EXPECT_EQ(row.class_lo_ns[1], 4000);
  EXPECT_EQ(row.class_hi_ns[1], 5000);
  EXPECT_EQ(row.ceiling, "interconnect");
}

} // namespace
} // namespace ridgeline
