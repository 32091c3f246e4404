// The backend interface's composed ops, for backends that do not fuse them: a GEMM plus an
// addend, a forward GEMM and the op after it (and the RMS norm before it, when asked), in
// turn, and the grouped GEMM as one GEMM per group.
#include "models/backend.hpp"

#include "core/error.hpp"

namespace ridgeline {

void Backend::gemm_add(const Tensor& a, const Tensor& w, const Tensor& addend, Tensor c) {
  RIDGELINE_REQUIRE(addend.data != c.data, "gemm_add: the addend is the output");
  copy(addend, c);
  gemm(a, Trans::no, w, Trans::yes, c, true, Lane::compute);
}

void Backend::grouped_gemm(const Tensor& a, const std::vector<Tensor>& w,
                           const std::vector<int64_t>& offsets, Tensor c, Lane lane) {
  RIDGELINE_REQUIRE(offsets.size() == w.size() + 1 && offsets.front() == 0 &&
                        offsets.back() == a.rows && c.rows == a.rows,
                    "grouped_gemm: the offsets do not cover the rows of a and c");
  for (size_t g = 0; g < w.size(); ++g) {
    const int64_t rows = offsets[g + 1] - offsets[g];
    RIDGELINE_REQUIRE(rows >= 0, "grouped_gemm: offsets decrease");
    if (rows == 0) continue;
    gemm(a.rows_slice(offsets[g], rows), Trans::no, w[g], Trans::yes,
         c.rows_slice(offsets[g], rows), false, lane);
  }
}

void Backend::gemm_epilogue(const Tensor& a, const Tensor& w, Tensor c, const GemmEpilogue& e) {
  if (e.norm_gamma.data != nullptr) {
    rms_norm(a, e.norm_gamma, e.norm_out, e.norm_eps);
    gemm(e.norm_out, w, c);
  } else {
    gemm(a, w, c);
  }
  switch (e.kind) {
  case GemmEpilogue::Kind::gelu:
    gelu(c, e.out);
    return;
  case GemmEpilogue::Kind::swiglu:
    swiglu(c, e.out);
    return;
  case GemmEpilogue::Kind::residual:
    add(e.out, c, e.out);
    return;
  case GemmEpilogue::Kind::rotary_append: {
    if (e.rotated_heads > 0)
      rotary(c.cols_slice(0, e.rotated_heads * e.head_dim), e.rotated_heads, e.head_dim, 1, e.pos,
             e.theta);
    const Tensor kv = c.cols_slice(e.cache_col0, c.cols - e.cache_col0);
    copy(kv, e.cache.strided_rows(e.pos, c.rows, e.cache_seq_rows).cols_slice(0, kv.cols));
    return;
  }
  }
}

} // namespace ridgeline
