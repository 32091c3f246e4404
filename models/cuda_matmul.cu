// The CUDA backend's cuBLASLt plans: descriptors, layouts and the heuristic's algorithms.
#include "models/cuda_matmul.hpp"

#include <string>
#include <vector>

#include "core/error.hpp"

namespace ridgeline {
namespace cuda {

MatmulPlan::MatmulPlan(cublasLtHandle_t handle, const MatmulShape& s) {
  RIDGELINE_CHECK(cublasLtMatmulDescCreate(&m_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  RIDGELINE_CHECK(
      cublasLtMatmulDescSetAttribute(m_desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  RIDGELINE_CHECK(
      cublasLtMatmulDescSetAttribute(m_desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  m_a = layout(s.ab_type, s.trans_a ? s.k : s.m, s.trans_a ? s.m : s.k, s.lda, s.batch, s.stride_a);
  m_b = layout(s.ab_type, s.trans_b ? s.n : s.k, s.trans_b ? s.k : s.n, s.ldb, s.batch, s.stride_b);
  m_c = layout(s.c_type, s.m, s.n, s.ldc, s.batch, s.stride_c);
  if (s.sms > 0) {
    // The heuristic then picks tiles and a grid for fewer SMs, leaving the rest to a
    // concurrent NCCL kernel instead of occupying every SM until the GEMM ends.
    const int32_t sms = static_cast<int32_t>(s.sms);
    RIDGELINE_CHECK(cublasLtMatmulDescSetAttribute(m_desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                                   &sms, sizeof(sms)));
  }

  cublasLtMatmulPreference_t pref = nullptr;
  RIDGELINE_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = workspace_bytes();
  const uint32_t align[3] = {static_cast<uint32_t>(s.align_a), static_cast<uint32_t>(s.align_b),
                             static_cast<uint32_t>(s.align_c)};
  std::vector<cublasLtMatmulHeuristicResult_t> results(s.search ? kSearchCandidates : 1);
  int found = 0;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                  &align[0], sizeof(uint32_t));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                  &align[1], sizeof(uint32_t));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &align[2], sizeof(uint32_t));
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &align[2], sizeof(uint32_t));
  if (status == CUBLAS_STATUS_SUCCESS)
    status =
        cublasLtMatmulAlgoGetHeuristic(handle, m_desc, m_a, m_b, m_c, m_c, pref,
                                       static_cast<int>(results.size()), results.data(), &found);
  RIDGELINE_CHECK_NOTHROW(cublasLtMatmulPreferenceDestroy(pref));
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy();
    RIDGELINE_CHECK(status);
    throw Error("cuBLASLt found no algorithm for m=" + std::to_string(s.m) +
                " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) +
                " lda=" + std::to_string(s.lda) + " ldb=" + std::to_string(s.ldb) +
                " ldc=" + std::to_string(s.ldc));
  }
  for (int i = 0; i < found; ++i)
    if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
      m_candidates.push_back(results[static_cast<size_t>(i)]);
  if (m_candidates.empty()) m_candidates.push_back(results[0]);
  choose(0);
}

std::string MatmulPlan::describe(size_t i) const {
  const cublasLtMatmulAlgo_t& algo = m_candidates[i].algo;
  auto attr = [&](cublasLtMatmulAlgoConfigAttributes_t which) {
    int32_t v = -1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, which, &v, sizeof(v), &written) !=
        CUBLAS_STATUS_SUCCESS)
      return std::string("?");
    return std::to_string(v);
  };
  return "algo " + attr(CUBLASLT_ALGO_CONFIG_ID) + " tile " + attr(CUBLASLT_ALGO_CONFIG_TILE_ID) +
         " split-k " + attr(CUBLASLT_ALGO_CONFIG_SPLITK_NUM) + " reduction " +
         attr(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
}

cublasLtMatrixLayout_t MatmulPlan::layout(cudaDataType_t type, int64_t rows, int64_t cols,
                                          int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  RIDGELINE_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows),
                                             static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    RIDGELINE_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                     sizeof(count)));
    RIDGELINE_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &stride, sizeof(stride)));
  }
  return l;
}

void MatmulPlan::destroy() noexcept {
  if (m_c != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(m_c));
  if (m_b != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(m_b));
  if (m_a != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatrixLayoutDestroy(m_a));
  if (m_desc != nullptr) RIDGELINE_CHECK_NOTHROW(cublasLtMatmulDescDestroy(m_desc));
  m_a = m_b = m_c = nullptr;
  m_desc = nullptr;
}

int64_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int64_t align = 256;
  while (align > 2 && a % static_cast<uintptr_t>(align) != 0)
    align /= 2;
  return align;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
  case DType::bf16:
    return CUDA_R_16BF;
  case DType::f16:
    return CUDA_R_16F;
  case DType::f32:
    return CUDA_R_32F;
  case DType::i32:
    return CUDA_R_32I;
  }
  throw Error("unknown dtype");
}

Operand operand(const Tensor& t) {
  Operand o;
  o.data = t.data;
  o.rows = t.rows;
  o.cols = t.cols;
  o.ld = t.ld;
  o.type = cuda_type(t.dtype);
  return o;
}

} // namespace cuda
} // namespace ridgeline
