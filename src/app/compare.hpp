// `ridgeline compare A.h5 B.h5`: what changed between two results — the stack, layer by layer,
// and every timing's median, with a bootstrap interval and a verdict (docs/COMPARE.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app/run_data.hpp"

namespace ridgeline {

/// The layers of a result's stack, in the order compare prints them. `not_compared` holds run
/// identity (time stamps, command line, output paths, process ids, launcher bookkeeping) and
/// momentary readings: keys that differ between any two launches and say nothing of the stack.
enum class StackLayer {
  hardware,
  driver,
  cuda,
  gemm_library,
  attention_library,
  nccl,
  mpi,
  hdf5,
  compiler,
  build,
  environment,
  clocks,
  configuration,
  other,
  not_compared
};

/// Short name of a layer ("environment"): the JSON value and what tests match.
const char* stack_layer_id(StackLayer layer);
/// Heading of a layer in the console and markdown ("environment variables").
const char* stack_layer_title(StackLayer layer);

/// Where a stack key is stored: root attributes, /stack attributes, /stack/env, /config,
/// /topology (one value per rank), /summary attributes (the NVML gpu.<loop>.* means).
enum class KeySource { root, stack, env, config, topology, summary };
/// "root", "stack", "env", "config", "topology" or "summary".
const char* key_source_name(KeySource source);

/// The layer of `key` stored in `source`: the first matching row of the one registry in
/// compare.cpp (kLayerRules); `other` when no row matches.
StackLayer stack_layer_of(KeySource source, const std::string& key);

/// One stack key whose value differs between the two files.
struct StackDifference {
  StackLayer layer = StackLayer::other;
  KeySource source = KeySource::root;
  std::string key;
  std::string a; ///< value in A as text: one value, or one per rank; "(absent)" / "(unset)"
  std::string b; ///< the same for B
};

/// Every key of the root, /stack, /stack/env, /config, /topology and /summary gpu.* attributes
/// of `a` and `b` whose values differ, ordered by layer, source and key. Numbers of a layer
/// rule with a tolerance (NVML clocks and power) differ only beyond it; the stack's git_sha is
/// compared without its "-dirty" suffix. Keys of the `not_compared` layer are included, for the
/// caller to list apart.
std::vector<StackDifference> diff_stack(const RunData& a, const RunData& b);

/// The /summary attributes of `a` and `b` that differ (as diff_stack() compares the root
/// summary's), each key prefixed with `prefix`, appended to `out`.
void diff_summary_attrs(const Attrs& a, const Attrs& b, const std::string& prefix,
                        std::vector<StackDifference>& out);
/// Orders differences as diff_stack() does: by layer, source and key.
void sort_stack_differences(std::vector<StackDifference>& diffs);
/// `delta` relative to `base`; infinite for a change from 0, 0 for none.
double relative_change(double delta, double base);

/// Resamples of the bootstrap of the difference of medians.
inline constexpr int kBootstrapResamples = 2000;
/// Seed of its generator (std::mt19937_64, reseeded for every timing compared): the same two
/// files always give the same intervals.
inline constexpr uint64_t kBootstrapSeed = 1;
/// Coverage of the interval: the 2.5th and 97.5th percentiles of the resampled differences.
inline constexpr double kConfidence = 0.95;
/// Smallest noise a change must exceed (relative): within-run spread says nothing of the drift
/// between two runs, and a tight GPU run would otherwise call a 0.3 % clock drift a move.
inline constexpr double kNoiseFloor = 0.01;
/// Fewest samples per side for an interval: below it a bootstrap interval of a median is too
/// narrow to trust, and the verdict is "n/a".
inline constexpr size_t kMinSamples = 10;

/// The change of one timing's median from A to B.
struct MedianChange {
  size_t a_count = 0, b_count = 0; ///< samples on each side
  double a_p50_ns = 0, b_p50_ns = 0;
  double change = 0; ///< (b_p50 - a_p50) / a_p50
  double ci_low = 0; ///< interval of b_p50 - a_p50, relative to a_p50 (with has_interval)
  double ci_high = 0;
  double noise = 0;          ///< max((p75 - p25) / p50 of A, the same of B, kNoiseFloor)
  bool has_interval = false; ///< both sides have kMinSamples samples or more
  bool moved = false;        ///< the interval excludes 0 and |change| > noise
};

/// Compares the medians of two series of per-iteration times (ns): the bootstrap interval of the
/// difference of medians (kBootstrapResamples resamples of each side, kBootstrapSeed) and the
/// verdict rule of MedianChange::moved. Deterministic; empty series give a zero change.
MedianChange compare_medians(const std::vector<double>& a, const std::vector<double>& b);

/// Each op's total time per timed iteration (ns), the per_step series behind /summary/ops
/// per_step_p50_ns: per iteration (warmup == 0 rows), the maximum over ranks of the union of
/// the rank's intervals of that op (instances in flight together count once). The same
/// definition as summarize_run() in summary.cpp.
std::map<std::string, std::vector<double>>
op_totals_per_iteration(const OpTable& ops,
                        const std::vector<std::vector<TimelineRecord>>& timelines);

} // namespace ridgeline
