// cuDNN's fused scaled-dot-product attention (--attention cudnn) through the cuDNN frontend's
// graph API: one graph per shape, built once and cached. Plain C++ (no cuDNN or CUDA headers);
// a build without cuDNN provides the same functions, which say so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "models/backend.hpp"

namespace ridgeline {

/// Whether this binary was built with the cuDNN attention (RIDGELINE_HAVE_CUDNN).
bool cudnn_compiled();
/// The cuDNN version the binary was built against, "9.28.1" ("" without cuDNN).
std::string cudnn_build_version();
/// Loads libcudnn.so.9 (once per process) and returns cudnnGetVersion() (e.g. 91900). Throws
/// UsageError, with what to install, when the build has no cuDNN, the library cannot be loaded,
/// or its major version differs from the build's.
int64_t cudnn_runtime_version();
/// cudnn_runtime_version() as "9.19.0"; "" where the library was never loaded in this process.
std::string cudnn_loaded_version();

/// A cuDNN handle on one CUDA stream and the graphs it has built (forward and backward, one per
/// shape, layout and element type). Every call is asynchronous on the stream; building a graph
/// (the first call of a shape) synchronises nothing but takes milliseconds.
class CudnnAttention {
public:
  /// `stream` is a cudaStream_t. Throws UsageError where cudnn_runtime_version() does.
  explicit CudnnAttention(void* stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  /// out = softmax(q k^T / sqrt(d) + mask) v in the layout of Backend::attention (rows of
  /// heads x head_dim columns; causal: bottom-right aligned, query i of seq sees keys
  /// j <= context - seq + i). With `stats` (fp32, batch x heads x seq, device memory) the
  /// softmax log-sum-exp is written for backward(). Throws UsageError for a shape cuDNN's
  /// engines do not support, with cuDNN's reason.
  void forward(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
               Tensor out, void* stats = nullptr);
  /// Gradients dq, dk, dv (same layouts as q, k, v; dk and dv have kv_heads heads: grouped
  /// heads are summed) from the forward's q, k, v, out, its stats and the output gradient.
  void backward(const AttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                const Tensor& out, const Tensor& dout, const void* stats, Tensor dq, Tensor dk,
                Tensor dv);

  /// One line per graph built: "<fwd|bwd> b=.. h=.. kv=.. s=.. ctx=.. d=.. <dtype> causal:
  /// <engine and knobs cuDNN chose>", in build order.
  std::vector<std::string> plans() const;

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

} // namespace ridgeline
