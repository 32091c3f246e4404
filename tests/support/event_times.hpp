// The GPU benchmarks' timing loop: `reps` calls after `warmup`, each bracketed by its own pair of
// CUDA events on `stream`, their times in milliseconds, sorted (front: the best; the middle: the
// median).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "core/cuda_check.hpp"

namespace ridgeline {

inline std::vector<double> event_times_ms(cudaStream_t stream, int warmup, int reps,
                                          const std::function<void()>& call) {
  for (int i = 0; i < warmup; ++i)
    call();
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(reps));
  for (cudaEvent_t& e : events)
    RIDGELINE_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    RIDGELINE_CHECK(cudaEventRecord(events[2 * i], stream));
    call();
    RIDGELINE_CHECK(cudaEventRecord(events[2 * i + 1], stream));
  }
  RIDGELINE_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    RIDGELINE_CHECK(cudaEventElapsedTime(&t, events[2 * i], events[2 * i + 1]));
    ms.push_back(t);
  }
  for (cudaEvent_t e : events)
    RIDGELINE_CHECK_NOTHROW(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms;
}

} // namespace ridgeline
