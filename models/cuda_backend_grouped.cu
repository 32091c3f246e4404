// The CUDA backend's grouped GEMM (an MoE layer's experts: each group of rows times its own
// weights). One cuBLASLt GEMM per group on one stream leaves most SMs idle when the groups are
// small (an expert's few hundred rows fill a fraction of a wave), so the groups either spread
// over a few streams that run at once (GroupedGemm::streams) or go to cuBLAS's grouped batched
// GEMM in one call (GroupedGemm::cublas). GroupedGemm::loop keeps the one-stream loop.
#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "models/cuda_backend_impl.cuh"

namespace ridgeline {
namespace cuda {

void CudaBackend::grouped_gemm(const Tensor& a, const std::vector<Tensor>& w,
                               const std::vector<int64_t>& offsets, Tensor c, Lane lane) {
  RIDGELINE_REQUIRE(offsets.size() == w.size() + 1 && offsets.front() == 0 &&
                        offsets.back() == a.rows && c.rows == a.rows,
                    "grouped_gemm: the offsets do not cover the rows of a and c");
  size_t busy = 0;
  for (size_t g = 0; g < w.size(); ++g) {
    RIDGELINE_REQUIRE(offsets[g + 1] >= offsets[g], "grouped_gemm: offsets decrease");
    RIDGELINE_REQUIRE(w[g].cols == a.cols && w[g].rows == c.cols,
                      "grouped_gemm: shapes do not match c[m,n] = a[m,k] * w[g][n,k]^T");
    require_dtype(w[g]);
    busy += offsets[g + 1] > offsets[g] ? 1 : 0;
  }
  require_dtype(a);
  require_dtype(c);
  // --gemm-algo search and skinny choose per GEMM, so their groups stay one gemm() each.
  if (m_grouped == GroupedGemm::loop || busy < 2 || a.cols == 0 || c.cols == 0 ||
      m_gemm_algo != GemmAlgo::heuristic) {
    Backend::grouped_gemm(a, w, offsets, c, lane);
    return;
  }
  // cuBLAS's pointer arrays are uploaded from pageable memory, which a capture cannot record.
  if (m_grouped == GroupedGemm::cublas && !m_capturing)
    grouped_cublas(a, w, offsets, c, lane);
  else
    grouped_on_streams(a, w, offsets, c, lane);
}

void CudaBackend::grouped_on_streams(const Tensor& a, const std::vector<Tensor>& w,
                                     const std::vector<int64_t>& offsets, Tensor c, Lane lane) {
  if (m_group_streams.empty()) {
    for (size_t i = 0; i < kGroupStreams; ++i) {
      m_group_streams.emplace_back(0);
      m_group_ws.emplace_back(workspace_bytes());
      m_group_done.emplace_back(false);
    }
    m_group_fork = std::make_unique<Event>(false);
  }
  const cudaStream_t home = raw(lane);
  RIDGELINE_CHECK(cudaEventRecord(m_group_fork->get(), home));
  // Each group to the stream with the fewest rows so far: the streams finish close together.
  std::array<int64_t, kGroupStreams> load{};
  std::array<bool, kGroupStreams> used{};
  for (size_t g = 0; g < w.size(); ++g) {
    const int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    const size_t i = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    const cudaStream_t st = m_group_streams[i].get();
    if (!used[i]) RIDGELINE_CHECK(cudaStreamWaitEvent(st, m_group_fork->get(), 0));
    used[i] = true;
    load[i] += rows;
    const Tensor ag = a.rows_slice(offsets[g], rows), cg = c.rows_slice(offsets[g], rows);
    const MatmulShape s = matmul_shape(operand(ag), Trans::no, operand(w[g]), Trans::yes,
                                       operand(cg), false, 1, false, nullptr);
    DeviceBuffer& ws = m_group_ws[i];
    plan_of(s).run(m_lt.get(), 1.0f, 0.0f, w[g].data, ag.data, cg.data, cg.data,
                   ws.bytes() ? ws.data() : nullptr, st);
  }
  for (size_t i = 0; i < kGroupStreams; ++i) {
    if (!used[i]) continue;
    RIDGELINE_CHECK(cudaEventRecord(m_group_done[i].get(), m_group_streams[i].get()));
    RIDGELINE_CHECK(cudaStreamWaitEvent(home, m_group_done[i].get(), 0));
  }
}

void CudaBackend::grouped_cublas(const Tensor& a, const std::vector<Tensor>& w,
                                 const std::vector<int64_t>& offsets, Tensor c, Lane lane) {
  if (!m_cublas) m_cublas = std::make_unique<CublasHandle>();
  // Row-major c_g = a_g w_g^T is column-major c_g^T = op(w_g) a_g^T with op transposing w_g's
  // column-major [k, n] view: one problem per group, each its own group of size one (the row
  // counts differ).
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> m, n, k, lda, ldb, ldc, size;
  std::vector<float> alpha, beta;
  std::vector<const void*> pa, pb, pc;
  const size_t elem = dtype_size(m_dtype);
  for (size_t g = 0; g < w.size(); ++g) {
    const int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    ta.push_back(CUBLAS_OP_T);
    tb.push_back(CUBLAS_OP_N);
    m.push_back(static_cast<int>(c.cols));
    n.push_back(static_cast<int>(rows));
    k.push_back(static_cast<int>(a.cols));
    lda.push_back(static_cast<int>(w[g].ld));
    ldb.push_back(static_cast<int>(a.ld));
    ldc.push_back(static_cast<int>(c.ld));
    size.push_back(1);
    alpha.push_back(1.0f);
    beta.push_back(0.0f);
    pa.push_back(w[g].data);
    pb.push_back(static_cast<const char*>(a.data) + static_cast<size_t>(offsets[g] * a.ld) * elem);
    pc.push_back(static_cast<const char*>(c.data) + static_cast<size_t>(offsets[g] * c.ld) * elem);
  }
  const size_t count = pa.size();
  std::vector<const void*> host(pa);
  host.insert(host.end(), pb.begin(), pb.end());
  host.insert(host.end(), pc.begin(), pc.end());
  const size_t bytes = host.size() * sizeof(void*);
  const cudaStream_t home = raw(lane);
  // Stream-ordered: the next call's upload waits for this call's GEMMs to have read them.
  auto* d = static_cast<const void**>(scratch(m_group_ptrs, bytes));
  RIDGELINE_CHECK(cudaMemcpyAsync(d, host.data(), bytes, cudaMemcpyHostToDevice, home));
  DeviceBuffer& ws = m_workspace[lane_slot(lane)];
  if (ws.bytes() == 0 && workspace_bytes() > 0) ws = DeviceBuffer(workspace_bytes());
  const cublasHandle_t h = m_cublas->get();
  RIDGELINE_CHECK(cublasSetStream(h, home));
  RIDGELINE_CHECK(cublasSetWorkspace(h, ws.data(), ws.bytes()));
  RIDGELINE_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  const cudaDataType_t t = cuda_type(m_dtype);
  RIDGELINE_CHECK(cublasGemmGroupedBatchedEx(
      h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), d, t, lda.data(),
      d + count, t, ldb.data(), beta.data(), const_cast<void* const*>(d + 2 * count), t, ldc.data(),
      static_cast<int>(count), size.data(), CUBLAS_COMPUTE_32F));
}

} // namespace cuda
} // namespace ridgeline
