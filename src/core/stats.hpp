// Summary statistics used by every report: percentiles, means, steady-state detection, and the
// relative error every correctness check compares against its tolerance.
#pragma once

#include <cstddef>
#include <vector>

namespace ridgeline {

/// Percentile with linear interpolation between order statistics (numpy's default), p in [0,100].
double percentile(std::vector<double> values, double p);
double mean(const std::vector<double>& values);

/// Summary of one series of per-iteration times.
struct SeriesStats {
  size_t count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p95 = 0, p99 = 0;
};
SeriesStats summarize(const std::vector<double>& values);

/// Number of leading warm-up iterations that were not yet in steady state: the index of the
/// first warm-up iteration from which every later warm-up time lies within `tolerance`
/// (relative) of the timed p50. Equals warmup.size() when the warm-up never settled.
size_t warmup_to_steady(const std::vector<double>& warmup, double timed_p50, double tolerance);

/// ||got - want|| / ||want|| (L2 over every element; the absolute norm when `want` is zero);
/// infinity when the sizes differ or the difference is not finite.
double relative_l2(const std::vector<float>& got, const std::vector<float>& want);

} // namespace ridgeline
