// The one timed loop of ridgeline: a measurement's calls cut into samples, each sample between
// two marks of a Recorder on one queue. Every measuring loop runs through it: the protocol's
// recorded and uninstrumented loops, the collective sweeps, the roof probes, the stage's GEMM
// probes, the pipeline's action costs and a trace run's steps. Its times are read after the
// Recorder's flush(): device time where the Recorder's clock stamps a device's queues (CUDA
// events), host time where it is a HostClock (a call that synchronizes then measures the host's
// wait for the device as well).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/timeline.hpp"

namespace ridgeline {

/// One sample of a stamped loop: its two marks and the calls between them.
struct StampedSample {
  size_t begin = 0;
  size_t end = 0;
  int calls = 0;
  /// Its time in ns (once the Recorder's marks are resolved by flush()).
  double ns(const Recorder& rec) const {
    return static_cast<double>(rec.mark_ns(end) - rec.mark_ns(begin));
  }
  /// Its time per call.
  double ns_per_call(const Recorder& rec) const { return ns(rec) / calls; }
};

/// How a loop's samples are marked: `shared`, a sample's end mark is the next one's begin (the
/// samples cover the loop without a gap: the host's time between two calls counts where the
/// queue waited for it); `paired`, each sample between two marks of its own (the host's time
/// between them counts in none, as nccl-tests' per-call events).
enum class SampleMarks { shared, paired };

/// Runs call(i) for i in [0, calls), cut into `samples` samples: sample j holds the calls
/// [j * calls / samples, (j + 1) * calls / samples). Marks on `queue` of `rec` around each
/// sample as `marks` says, and appends the samples to `out`. Marks are recorded even while
/// `rec` is disabled.
template <class Call>
void stamped_loop(Recorder& rec, Lane queue, int calls, int samples, Call&& call,
                  std::vector<StampedSample>& out, SampleMarks marks = SampleMarks::shared) {
  RIDGELINE_REQUIRE(samples >= 1 && calls >= samples,
                    "a stamped loop needs at least one call per sample");
  size_t begin = rec.mark(queue);
  int first = 0;
  for (int j = 0; j < samples; ++j) {
    const int last = static_cast<int>(static_cast<int64_t>(j + 1) * calls / samples);
    for (int i = first; i < last; ++i)
      call(i);
    const size_t end = rec.mark(queue);
    out.push_back(StampedSample{begin, end, last - first});
    first = last;
    begin = marks == SampleMarks::paired && j + 1 < samples ? rec.mark(queue) : end;
  }
}

/// Each sample's time per call (after the Recorder's flush()).
std::vector<double> ns_per_call(const Recorder& rec, const std::vector<StampedSample>& samples);

} // namespace ridgeline
