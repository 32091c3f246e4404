// What the GPU tests that compare the CUDA backend with the host backend share: a tensor on both
// backends holding the same values (the GPU's, rounded to its dtype, copied to the host's fp32),
// so that only the kernels' arithmetic differs, and the relative L2 error of two results.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/stats.hpp"
#include "models/backend.hpp"

namespace ridgeline {

/// Relative L2 error of `got` against `want` (their sizes must agree).
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  return relative_l2(got, want);
}

struct BackendPair {
  Buffer gpu_buf, host_buf;
  Tensor gpu, host;
};

/// rows x cols on `gpu` in `dtype` (rows padded to `ld`; 0: cols) and on `host` in fp32: random
/// from `key`, or zero when key.scale <= 0, generated on the GPU and copied to the host.
inline BackendPair make_backend_pair(Backend& gpu, Backend& host, DType dtype, int64_t rows,
                                     int64_t cols, const GenKey& key, int64_t ld = 0) {
  BackendPair p;
  if (ld == 0) ld = cols;
  p.gpu_buf = gpu.allocate(rows, ld);
  p.gpu = p.gpu_buf.view(rows, ld, dtype).cols_slice(0, cols);
  p.host_buf = host.allocate(rows, cols);
  p.host = p.host_buf.view(rows, cols, DType::f32);
  if (key.scale > 0)
    gpu.fill_random(p.gpu, key, 0, 0);
  else
    gpu.fill_value(p.gpu, 0.0f);
  const std::vector<float> v = gpu.to_host(p.gpu);
  std::memcpy(p.host.data, v.data(), v.size() * sizeof(float));
  return p;
}

} // namespace ridgeline
