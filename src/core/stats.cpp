// Percentiles and steady-state detection.
#include "stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ridgeline {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double pos = (p / 100.0) * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

SeriesStats summarize(const std::vector<double>& values) {
  SeriesStats s;
  s.count = values.size();
  if (values.empty()) return s;
  s.mean = mean(values);
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  s.p50 = percentile(values, 50);
  s.p95 = percentile(values, 95);
  s.p99 = percentile(values, 99);
  return s;
}

size_t warmup_to_steady(const std::vector<double>& warmup, double timed_p50, double tolerance) {
  size_t first_steady = warmup.size();
  for (size_t i = warmup.size(); i-- > 0;) {
    if (std::fabs(warmup[i] - timed_p50) > tolerance * timed_p50) break;
    first_steady = i;
  }
  return first_steady;
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  if (!std::isfinite(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

} // namespace ridgeline
