// Summary statistics used by every report: percentiles, means, steady-state detection, and the
// relative error every correctness check compares against its tolerance.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace ridgeline {

/// Percentile with linear interpolation between order statistics (numpy's default), p in [0,100].
double percentile(std::vector<double> values, double p);
double mean(const std::vector<double>& values);
/// The median of `v` (reordered in place); equal to percentile(v, 50).
double median_in_place(std::vector<double>& v);
/// Draws from.size() values of `from` with replacement into `into`. The index is the generator's
/// output modulo the size, not std::uniform_int_distribution, whose algorithm differs between
/// standard libraries: the same data give the same resamples everywhere.
void resample(const std::vector<double>& from, std::vector<double>& into, std::mt19937_64& rng);

/// Summary of one series of per-iteration times.
struct SeriesStats {
  size_t count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p95 = 0, p99 = 0;
};
SeriesStats summarize(const std::vector<double>& values);

/// A median with its 95 % interval (lo <= median <= hi).
struct Interval {
  double median = 0, lo = 0, hi = 0;
};

/// The median of several repeats of one measurement, each repeat a series of samples (per
/// iteration times; a repeat of one value where only one figure exists): the median of the
/// repeats' medians, with a 95 % percentile-bootstrap interval that resamples the repeats and,
/// within each, its samples (two levels, 2000 resamples), so that both the drift between repeats
/// and the spread inside one show in it. The generator has a fixed seed: the same input gives
/// the same interval. One repeat of one value gives a zero-width interval.
Interval repeated_median(const std::vector<std::vector<double>>& repeats);

/// Whether two intervals are disjoint: their medians differ beyond both intervals.
bool apart(const Interval& a, const Interval& b);

/// Number of leading warm-up iterations that were not yet in steady state: the index of the
/// first warm-up iteration from which every later warm-up time lies within `tolerance`
/// (relative) of the timed p50. Equals warmup.size() when the warm-up never settled.
size_t warmup_to_steady(const std::vector<double>& warmup, double timed_p50, double tolerance);

/// ||got - want|| / ||want|| (L2 over every element; the absolute norm when `want` is zero);
/// infinity when the sizes differ or the difference is not finite.
double relative_l2(const std::vector<float>& got, const std::vector<float>& want);

} // namespace ridgeline
