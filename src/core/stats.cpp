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

double median_in_place(std::vector<double>& v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

void resample(const std::vector<double>& from, std::vector<double>& into, std::mt19937_64& rng) {
  into.resize(from.size());
  for (double& x : into)
    x = from[rng() % from.size()];
}

Interval repeated_median(const std::vector<std::vector<double>>& repeats) {
  std::vector<const std::vector<double>*> used;
  for (const std::vector<double>& r : repeats)
    if (!r.empty()) used.push_back(&r);
  Interval out;
  if (used.empty()) return out;
  std::vector<double> medians, copy;
  for (const std::vector<double>* r : used) {
    copy = *r;
    medians.push_back(median_in_place(copy));
  }
  out.median = percentile(medians, 50);
  constexpr int kResamples = 2000;
  std::mt19937_64 rng(0x5eed);
  std::vector<double> stats(kResamples), outer(used.size()), inner;
  for (double& stat : stats) {
    for (double& m : outer) {
      resample(*used[rng() % used.size()], inner, rng);
      m = median_in_place(inner);
    }
    stat = median_in_place(outer);
  }
  out.lo = std::min(out.median, percentile(stats, 2.5));
  out.hi = std::max(out.median, percentile(stats, 97.5));
  return out;
}

bool apart(const Interval& a, const Interval& b) {
  return a.lo > b.hi || b.lo > a.hi;
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
