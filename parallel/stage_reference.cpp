// The check of a scheduled point (see stage_reference.hpp).
#include "parallel/stage_reference.hpp"

#include <algorithm>
#include <utility>

#include "core/checksum.hpp"
#include "core/ranges.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

// Rows [r0, r0 + nr) and columns [c0, c0 + nc) of a row-major host matrix of `cols` columns.
std::vector<float> block(const std::vector<float>& full, int64_t cols, int64_t r0, int64_t nr,
                         int64_t c0, int64_t nc) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(nr * nc));
  for (int64_t r = r0; r < r0 + nr; ++r)
    for (int64_t c = c0; c < c0 + nc; ++c)
      out.push_back(full[static_cast<size_t>(r * cols + c)]);
  return out;
}

// Appends rows of `b` below `a` (same columns).
std::vector<float> stacked(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A layer's gradient tensors in the order the reference keeps them.
std::vector<const Tensor*> grad_tensors(const LayerGrads& g) {
  return {&g.ln1_gamma, &g.ln1_beta, &g.ln2_gamma, &g.ln2_beta, &g.wqkv, &g.wo, &g.w1, &g.w2};
}

// The largest error of this rank's shard of one layer's weight gradients against the TP=1
// ones (layer_weights.hpp gives the layout).
double layer_grads_error(Backend& backend, const TrainStage& stage, const ModelSpec& m,
                         const LayerGrads& mine, const std::vector<std::vector<float>>& ref,
                         std::string& skipped) {
  const LayerGeometry& g = stage.geometry();
  const int64_t h = m.hidden, d = g.head_dim, r = stage.spec().tp_rank;
  const int64_t qr = m.heads * d, kvr = m.kv_heads * d, f = m.ffn_hidden;
  std::vector<std::pair<const Tensor*, std::vector<float>>> pairs = {
      {&mine.ln1_gamma, ref[0]},
      {&mine.ln1_beta, ref[1]},
      {&mine.ln2_gamma, ref[2]},
      {&mine.ln2_beta, ref[3]},
      {&mine.wo, block(ref[5], qr, 0, h, r * g.q_cols(), g.q_cols())},
      {&mine.w2, block(ref[7], f, 0, h, r * g.ffn, g.ffn)}};
  std::vector<float> w1 = block(ref[6], h, r * g.ffn, g.ffn, 0, h);
  if (g.swiglu) w1 = stacked(w1, block(ref[6], h, f + r * g.ffn, g.ffn, 0, h));
  pairs.emplace_back(&mine.w1, w1);
  double err = 0;
  for (auto& [tensor, want] : pairs)
    err = std::max(err, relative_l2(backend.to_host(*tensor), want));
  // Wqkv: the query rows always; the key and value rows where each rank holds its own heads
  // (replicated KV heads get part of their gradient on each rank sharing them).
  const std::vector<float> qkv = backend.to_host(mine.wqkv);
  err = std::max(err, relative_l2(block(qkv, h, 0, g.q_cols(), 0, h),
                                  block(ref[4], h, r * g.q_cols(), g.q_cols(), 0, h)));
  if (!g.kv_replicated)
    err = std::max(
        err, relative_l2(block(qkv, h, g.q_cols(), 2 * g.kv_cols(), 0, h),
                         stacked(block(ref[4], h, qr + g.kv_head0 * d, g.kv_cols(), 0, h),
                                 block(ref[4], h, qr + kvr + g.kv_head0 * d, g.kv_cols(), 0, h))));
  else
    skipped = " (replicated KV heads: their Wk and Wv gradients not compared)";
  return err;
}

} // namespace

StageReference compute_stage_reference(Backend& backend, const TrainSpec& spec, int64_t layers,
                                       int64_t global_mbs, bool train) {
  const ranges::Scope range(kReferenceRange);
  TrainSpec ref = spec;
  ref.shape.tp = 1;
  ref.overlap = Overlap{};
  ref.symmetric_buffers = false;
  ref.tp_rank = 0;
  ref.recompute = false;
  ref.chunks = {{0, layers}};
  OpTable scratch;
  TrainStage stage(backend, nullptr, ref, scratch);
  Recorder silent(backend.clock(), scratch);
  silent.set_enabled(false);
  StageReference out;
  stage.begin_iteration(silent, static_cast<int>(global_mbs));
  for (int64_t g = 0; g < global_mbs; ++g) {
    stage.fill_input(0, 0, g);
    stage.forward(silent, 0, 0);
    out.outputs.push_back(backend.to_host(stage.activation_out(0, 0)));
    if (train) {
      stage.fill_grad_output(0, 0, g);
      stage.backward(silent, 0, 0);
      out.input_grads.push_back(backend.to_host(stage.gradient_out(0, 0)));
    }
    stage.release(0, 0);
  }
  if (train)
    for (size_t l = 0; l < stage.local_layers(); ++l) {
      std::vector<std::vector<float>> tensors;
      for (const Tensor* t : grad_tensors(stage.grads(l)))
        tensors.push_back(backend.to_host(*t));
      out.grads.push_back(std::move(tensors));
    }
  backend.synchronize();
  return out;
}

double stage_check_error(Backend& backend, const TrainStage& stage, const PipelineDriver& driver,
                         const StageReference& reference, const PipelineSpec& spec,
                         std::string& skipped) {
  double err = 0;
  const int mbs = spec.microbatches;
  // This rank's rows of a reference tensor of the stream, in the order it holds them (all of
  // them without sequence parallelism).
  const LayerGeometry& geo = stage.geometry();
  auto my_rows = [&](const std::vector<float>& full) {
    std::vector<float> mine;
    for (const auto& [first, rows] : stage.row_blocks(0)) {
      const std::vector<float> b = block(full, geo.hidden, first, rows, 0, geo.hidden);
      mine.insert(mine.end(), b.begin(), b.end());
    }
    return mine;
  };
  auto global = [&](int mb) { return static_cast<size_t>(spec.replica * mbs + mb); };
  if (!spec.train && spec.stage == spec.stages - 1)
    for (int mb = 0; mb < mbs; ++mb)
      err = std::max(err, relative_l2(driver.outputs()[static_cast<size_t>(mb)],
                                      my_rows(reference.outputs[global(mb)])));
  if (!spec.train) return err;
  if (spec.stage == 0)
    for (int mb = 0; mb < mbs; ++mb)
      err = std::max(err, relative_l2(driver.input_grads()[static_cast<size_t>(mb)],
                                      my_rows(reference.input_grads[global(mb)])));
  for (size_t l = 0; l < stage.local_layers(); ++l)
    err = std::max(err, layer_grads_error(
                            backend, stage, stage.spec().model, stage.grads(l),
                            reference.grads[static_cast<size_t>(stage.global_layer(l))], skipped));
  return err;
}

uint64_t stage_output_hash(Backend& backend, const TrainStage& stage, const PipelineDriver& driver,
                           const PipelineSpec& spec, uint64_t hash, bool& holds) {
  auto hash_values = [&](const std::vector<float>& values) {
    hash = fnv1a64(values.data(), values.size() * sizeof(float), hash);
    holds = true;
  };
  if (!spec.train && spec.stage == spec.stages - 1)
    for (const std::vector<float>& out : driver.outputs())
      hash_values(out);
  if (!spec.train) return hash;
  if (spec.stage == 0)
    for (const std::vector<float>& grad : driver.input_grads())
      hash_values(grad);
  for (size_t l = 0; l < stage.local_layers(); ++l)
    for (const Tensor* t : grad_tensors(stage.grads(l)))
      hash_values(backend.to_host(*t));
  return hash;
}

} // namespace ridgeline
