// The backend interface's composed ops, for backends that do not fuse them: a GEMM plus an
// addend, a forward GEMM and the op after it (and the RMS norm before it, when asked), in
// turn, the router's top-k on the host, the grouped GEMM as one GEMM per group, the row gather, row
// scatter and weighted scatter-add as one copy or axpy per row, rotary at per-row positions as one
// rotary() per run of consecutive positions, and ragged decode attention as one attention() per run
// of equal contexts.
#include "models/backend.hpp"

#include "core/error.hpp"
#include "models/moe_routing.hpp"

namespace ridgeline {

void Backend::gemm_add(const Tensor& a, const Tensor& w, const Tensor& addend, Tensor c) {
  RIDGELINE_REQUIRE(addend.data != c.data, "gemm_add: the addend is the output");
  copy(addend, c);
  gemm(a, Trans::no, w, Trans::yes, c, true, Lane::compute);
}

void Backend::route_top_k(const Tensor& logits, int64_t top_k, bool sigmoid,
                          std::vector<int32_t>& expert, std::vector<float>& weight) {
  Routing r = ridgeline::route_top_k(to_host(logits), logits.rows, logits.cols, top_k,
                                     sigmoid ? GatingKind::sigmoid : GatingKind::softmax);
  expert = std::move(r.expert);
  weight = std::move(r.weight);
}

void Backend::gather_rows(const Tensor& x, const std::vector<int64_t>& index, Tensor out) {
  RIDGELINE_REQUIRE(static_cast<int64_t>(index.size()) == out.rows && x.cols == out.cols,
                    "gather_rows: one index per output row, rows of x's width");
  for (int64_t r = 0; r < out.rows; ++r)
    copy(x.rows_slice(index[static_cast<size_t>(r)], 1), out.rows_slice(r, 1));
}

void Backend::scatter_rows(const Tensor& rows, const std::vector<int64_t>& index, Tensor out) {
  RIDGELINE_REQUIRE(static_cast<int64_t>(index.size()) == rows.rows && rows.cols == out.cols,
                    "scatter_rows: one index per row, rows of out's width");
  for (int64_t r = 0; r < rows.rows; ++r)
    copy(rows.rows_slice(r, 1), out.rows_slice(index[static_cast<size_t>(r)], 1));
}

void Backend::rotary_rows(Tensor x, int64_t heads, int64_t head_dim,
                          const std::vector<int64_t>& positions, float theta) {
  RIDGELINE_REQUIRE(static_cast<int64_t>(positions.size()) == x.rows,
                    "rotary_rows: one position per row");
  for (size_t first = 0; first < positions.size();) {
    size_t end = first + 1;
    while (end < positions.size() && positions[end] == positions[end - 1] + 1)
      ++end;
    const int64_t n = static_cast<int64_t>(end - first);
    rotary(x.rows_slice(static_cast<int64_t>(first), n), heads, head_dim, n, positions[first],
           theta);
    first = end;
  }
}

void Backend::scatter_add_rows(const Tensor& rows, const std::vector<int64_t>& index,
                               const std::vector<float>& weight, Tensor y) {
  RIDGELINE_REQUIRE(static_cast<int64_t>(index.size()) == rows.rows &&
                        weight.size() == index.size() && rows.cols == y.cols,
                    "scatter_add_rows: one index and weight per row, rows of y's width");
  for (int64_t r = 0; r < rows.rows; ++r)
    axpy(weight[static_cast<size_t>(r)], rows.rows_slice(r, 1),
         y.rows_slice(index[static_cast<size_t>(r)], 1));
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

void Backend::attention_decode_ragged(const AttentionShape& shape,
                                      const std::vector<int64_t>& contexts, const Tensor& q,
                                      const Tensor& k, const Tensor& v, Tensor out,
                                      AttentionImpl impl) {
  RIDGELINE_REQUIRE(shape.seq == 1 && shape.batch == static_cast<int64_t>(contexts.size()),
                    "attention_decode_ragged: one query per sequence, one context per sequence");
  RIDGELINE_REQUIRE(q.rows == shape.batch && out.rows == shape.batch &&
                        k.rows == shape.batch * shape.capacity && v.rows == k.rows,
                    "attention_decode_ragged: q rows, or kv rows not batch * capacity");
  const int64_t cap = shape.capacity;
  for (size_t first = 0; first < contexts.size();) {
    size_t end = first + 1;
    while (end < contexts.size() && contexts[end] == contexts[first])
      ++end;
    AttentionShape run = shape;
    run.batch = static_cast<int64_t>(end - first);
    run.context = contexts[first];
    const int64_t row = static_cast<int64_t>(first);
    attention(run, q.rows_slice(row, run.batch), k.rows_slice(row * cap, run.batch * cap),
              v.rows_slice(row * cap, run.batch * cap), out.rows_slice(row, run.batch), impl);
    first = end;
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
