// The CUDA backend's cuBLASLt matmuls: a shape, its plan (the layouts and the algorithm the
// heuristic chose, or every candidate it offered when searching) and the operands' description.
#pragma once

#include <cublasLt.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "models/backend.hpp"

namespace ridgeline {
namespace cuda {

/// The cuBLASLt workspace each GEMM may use, in bytes (CUBLASLT_WORKSPACE_SIZE; cuda_backend.cu).
size_t workspace_bytes();

/// Owns a cublasLtHandle_t.
class CublasLtHandle {
public:
  CublasLtHandle() { RIDGELINE_CHECK(cublasLtCreate(&m_handle)); }
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;
  ~CublasLtHandle() { RIDGELINE_CHECK_NOTHROW(cublasLtDestroy(m_handle)); }
  cublasLtHandle_t get() const { return m_handle; }

private:
  cublasLtHandle_t m_handle = nullptr;
};

/// One cuBLASLt matmul in column-major terms: D[m, n] = alpha * op(A)[m, k] * op(B)[k, n]
/// (+ D when accumulating).
struct MatmulShape {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  cudaDataType_t ab_type = CUDA_R_16BF;
  cudaDataType_t c_type = CUDA_R_16BF;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t align_a = 256, align_b = 256, align_c = 256; ///< bytes: heuristics must respect them
  int64_t sms = 0;                                     ///< SM count target (0 = the device's)
  bool search = false;     ///< time the heuristic's candidates at first use and keep the fastest
  bool accumulate = false; ///< beta = 1: the product is added to what D holds

  std::array<int64_t, 20> key() const {
    return {trans_a, trans_b, m,       n,     k,        lda,       ldb,
            ldc,     ab_type, c_type,  batch, stride_a, stride_b,  stride_c,
            align_a, align_b, align_c, sms,   search,   accumulate};
  }
};

/// Candidates asked of the heuristic when searching (it may offer fewer, split-K among them).
constexpr int kSearchCandidates = 16;

/// A matmul description, its layouts and the algorithm the heuristic chose, built once per shape;
/// when searching, every candidate the heuristic offered, one of which choose() makes current.
class MatmulPlan {
public:
  MatmulPlan(cublasLtHandle_t handle, const MatmulShape& s);
  /// The heuristic's candidates, its first choice first.
  size_t candidates() const { return m_candidates.size(); }
  void choose(size_t i) {
    m_algo = m_candidates[i].algo;
    m_workspace = m_candidates[i].workspaceSize;
    m_skinny = false;
  }
  /// The project's skinny kernel instead of any cuBLASLt candidate (the search found it faster).
  void choose_skinny() { m_skinny = true; }
  bool skinny() const { return m_skinny; }
  size_t workspace_of(size_t i) const { return m_candidates[i].workspaceSize; }
  /// Candidate `i` once; false when cuBLASLt refuses it (nothing was launched then).
  bool try_run(size_t i, cublasLtHandle_t handle, const void* a, const void* b, void* c,
               void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(handle, m_desc, &alpha, a, m_a, b, m_b, &beta, c, m_c, c, m_c,
                          &m_candidates[i].algo, workspace, m_candidates[i].workspaceSize,
                          stream) == CUBLAS_STATUS_SUCCESS;
  }
  /// Candidate `i` in words: cuBLASLt's algorithm id, tile id, split-K factor and reduction.
  std::string describe(size_t i) const;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() { destroy(); }

  /// D = alpha * op(A) * op(B) + beta * C, with C and D in the same layout (C may be D).
  void run(cublasLtHandle_t handle, float alpha, float beta, const void* a, const void* b,
           const void* c, void* d, void* workspace, cudaStream_t stream) const {
    RIDGELINE_CHECK(cublasLtMatmul(handle, m_desc, &alpha, a, m_a, b, m_b, &beta, c, m_c, d, m_c,
                                   &m_algo, workspace, m_workspace, stream));
  }

private:
  static cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                                       int64_t batch, int64_t stride);
  void destroy() noexcept;

  cublasLtMatmulDesc_t m_desc = nullptr;
  cublasLtMatrixLayout_t m_a = nullptr, m_b = nullptr, m_c = nullptr;
  cublasLtMatmulAlgo_t m_algo{};
  size_t m_workspace = 0;
  bool m_skinny = false;
  std::vector<cublasLtMatmulHeuristicResult_t> m_candidates;
};

/// Largest power of two (up to 256) dividing the address: what cuBLASLt may assume.
int64_t alignment_of(const void* p);

cudaDataType_t cuda_type(DType t);

/// A row-major operand of a (batched) product: rows x cols elements of `type`, rows `ld` apart,
/// batch entries `stride` elements apart.
struct Operand {
  const void* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
  cudaDataType_t type = CUDA_R_16BF;
};

Operand operand(const Tensor& t);

} // namespace cuda
} // namespace ridgeline
