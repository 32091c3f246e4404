// Attention alone: each implementation of the CUDA backend (fused, naive, cudnn) timed forward
// and backward (the backward from the implementation's own forward output and log-sum-exp), on
// given shapes with CUDA events (median of --reps calls after --warmup).
// The achieved TFLOP/s of a row is also the ceiling that implementation gives a layer's
// attention op. FLOPs: forward 2 * 2 * b * h * s * ctx * d (QK^T and PV), halved when causal
// with s = ctx; backward 2.5 x forward. scripts/reference/torch_attention.py times PyTorch's SDPA
// backends on the same shapes and FLOP convention. --ragged times decode instead: one ragged
// call over sequences of different contexts beside one call per run of equal contexts, in us and
// GB/s of the K/V cache rows read. Exits 77 (skipped) with a note when no GPU is visible.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "models/attention_cudnn.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"
#include "tests/support/event_times.hpp"

namespace ridgeline {
namespace {

std::vector<int64_t> int_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(std::stoll(item));
  return out;
}

std::vector<std::string> word_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(item);
  return out;
}

struct Row {
  std::string impl, kernel, pass, status = "ok"; ///< kernel: the fused kernel that ran
  AttentionShape shape;
  double flops = 0, best_ms = 0, p50_ms = 0;
};

double forward_flops(const AttentionShape& s) {
  const double full = 4.0 * static_cast<double>(s.batch * s.heads * s.seq * s.context * s.head_dim);
  return s.causal && s.seq == s.context ? full / 2 : full;
}

// Median and best of `reps` calls, each bracketed by its own event pair on `stream`.
void time_calls(cudaStream_t stream, int warmup, int reps, const std::function<void()>& call,
                Row& row) {
  const std::vector<double> ms = event_times_ms(stream, warmup, reps, call);
  row.best_ms = ms.front();
  row.p50_ms = ms[ms.size() / 2];
}

// "lo:hi:n" (n contexts spread evenly over [lo, hi]) or a comma list.
std::vector<int64_t> ragged_contexts(const std::string& spec) {
  if (spec.find(':') == std::string::npos) return int_list(spec);
  std::vector<int64_t> parts;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ':'))
    parts.push_back(std::stoll(item));
  if (parts.size() != 3 || parts[2] < 1 || parts[0] < 1 || parts[1] < parts[0])
    throw UsageError("--ragged: expected lo:hi:n with 1 <= lo <= hi and n >= 1, got '" + spec +
                     "'");
  std::vector<int64_t> c;
  for (int64_t i = 0; i < parts[2]; ++i)
    c.push_back(parts[2] == 1 ? parts[0] : parts[0] + (parts[1] - parts[0]) * i / (parts[2] - 1));
  return c;
}

// Ragged decode, fused: one attention_decode_ragged() call (every sequence in one launch) beside
// the loop it replaces (Backend's default: one attention() per run of equal contexts), for each
// KV head count. GB/s: the K and V rows the sequences see, plus q and out, once each.
int run_ragged(Backend& gpu, cudaStream_t stream, const std::vector<int64_t>& contexts,
               const std::vector<int64_t>& kv_list, int64_t heads, int64_t head_dim, DType dt,
               int warmup, int reps) {
  std::printf("%-10s %5s %5s %5s %5s %9s %9s %10s %10s\n", "call", "seqs", "heads", "kv", "d",
              "keys", "p50 us", "GB/s", "x ragged");
  for (int64_t kvh : kv_list) {
    AttentionShape s;
    s.batch = static_cast<int64_t>(contexts.size());
    s.seq = 1;
    s.capacity = *std::max_element(contexts.begin(), contexts.end());
    s.heads = heads;
    s.kv_heads = kvh;
    s.head_dim = head_dim;
    const int64_t qw = heads * head_dim, kw = kvh * head_dim, kv_rows = s.batch * s.capacity;
    Buffer qb = gpu.allocate(s.batch, qw), kvb = gpu.allocate(kv_rows, 2 * kw),
           ob = gpu.allocate(s.batch, qw);
    const Tensor q = qb.view(s.batch, qw, dt), kv = kvb.view(kv_rows, 2 * kw, dt),
                 o = ob.view(s.batch, qw, dt);
    const Tensor k = kv.cols_slice(0, kw), v = kv.cols_slice(kw, kw);
    gpu.fill_random(q, GenKey{3, 1, qw, 1.0f}, 0, 0);
    gpu.fill_random(kv, GenKey{3, 2, 2 * kw, 1.0f}, 0, 0);
    int64_t keys = 0;
    for (int64_t c : contexts)
      keys += c;
    const double bytes =
        static_cast<double>(dtype_size(dt)) *
        (2.0 * static_cast<double>(keys * kw) + 2.0 * static_cast<double>(s.batch * qw));
    const std::vector<std::pair<const char*, std::function<void()>>> calls = {
        {"ragged",
         [&] { gpu.attention_decode_ragged(s, contexts, q, k, v, o, AttentionImpl::fused); }},
        {"loop", [&] {
           gpu.Backend::attention_decode_ragged(s, contexts, q, k, v, o, AttentionImpl::fused);
         }}};
    double ragged_us = 0;
    for (const auto& [name, call] : calls) {
      const std::vector<double> ms = event_times_ms(stream, warmup, reps, call);
      const double us = 1e3 * ms[ms.size() / 2];
      if (ragged_us == 0) ragged_us = us;
      std::printf("%-10s %5lld %5lld %5lld %5lld %9lld %9.1f %10.1f %10.2f\n", name,
                  static_cast<long long>(s.batch), static_cast<long long>(heads),
                  static_cast<long long>(kvh), static_cast<long long>(head_dim),
                  static_cast<long long>(keys), us, bytes / (us * 1e3), us / ragged_us);
    }
  }
  std::printf("GB/s: the K and V rows of every sequence's context, q and out, at the median "
              "call. x ragged: the call's time over the ragged call's.\n");
  return 0;
}

// The rows as a console table, FLOPs and rates explained below it.
void print_rows(const std::vector<Row>& rows) {
  std::printf("%-10s %-6s %-4s %5s %7s %5s %5s %5s %-7s %10s %10s  %s\n", "impl", "kernel", "pass",
              "batch", "seq", "heads", "kv", "d", "mask", "p50 ms", "TFLOP/s", "status");
  for (const Row& r : rows)
    std::printf("%-10s %-6s %-4s %5lld %7lld %5lld %5lld %5lld %-7s %10.4f %10.1f  %s\n",
                r.impl.c_str(), r.kernel.empty() ? "-" : r.kernel.c_str(), r.pass.c_str(),
                static_cast<long long>(r.shape.batch), static_cast<long long>(r.shape.seq),
                static_cast<long long>(r.shape.heads), static_cast<long long>(r.shape.kv_heads),
                static_cast<long long>(r.shape.head_dim), r.shape.causal ? "causal" : "full",
                r.p50_ms, r.p50_ms > 0 ? r.flops / (r.p50_ms * 1e9) : 0.0, r.status.c_str());
  std::printf("FLOPs: forward 4 * b * h * s * ctx * d, halved when causal; backward 2.5 x "
              "forward. TFLOP/s at the median call.\n");
}

// The rows and cuDNN's plans as JSON; false (said on stderr) if the file cannot be written.
bool write_json(const std::string& json, const std::string& dtype, const std::vector<Row>& rows,
                const std::vector<std::string>& all) {
  std::ofstream f(json);
  f << "{\"cudnn\": \"" << cudnn_loaded_version() << "\", \"cudnn_build\": \""
    << cudnn_build_version() << "\", \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::string status = r.status;
    for (char& c : status)
      if (c == '"' || c == '\\' || c == '\n') c = ' ';
    f << (i ? ",\n" : "\n") << "{\"impl\": \"" << r.impl << "\", \"kernel\": \"" << r.kernel
      << "\", \"pass\": \"" << r.pass << "\", \"batch\": " << r.shape.batch
      << ", \"seq\": " << r.shape.seq << ", \"heads\": " << r.shape.heads
      << ", \"kv_heads\": " << r.shape.kv_heads << ", \"head_dim\": " << r.shape.head_dim
      << ", \"causal\": " << (r.shape.causal ? "true" : "false") << ", \"dtype\": \"" << dtype
      << "\", \"flops\": " << r.flops << ", \"best_ms\": " << r.best_ms
      << ", \"p50_ms\": " << r.p50_ms << ", \"status\": \"" << status << "\"}";
  }
  f << "\n], \"plans\": [";
  for (size_t i = 0; i < all.size(); ++i)
    f << (i ? ", " : "") << "\"" << all[i] << "\"";
  f << "]}\n";
  if (!f) {
    std::cerr << "bench_attention: cannot write " << json << "\n";
    return false;
  }
  return true;
}

// The forward (and unless `no_backward` the backward) of `impl` on shape `s` over q, k, v and o,
// timed: its rows appended to `rows` (a failure is a row's status).
void time_impl(Backend& gpu, cudaStream_t stream, const AttentionShape& s, const std::string& name,
               AttentionImpl impl, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& o, int warmup, int reps, bool no_backward, std::vector<Row>& rows) {
  const DType dt = q.dtype;
  const int64_t qw = q.cols, kw = k.cols, qrows = q.rows, batch = s.batch, heads = s.heads,
                seq = s.seq, head_dim = s.head_dim;
  const bool forced_sm80 = name == "fused-sm80";
  Row fwd;
  fwd.impl = name;
  // A build without cuDNN has nothing to time there: its rows say so and fail nothing.
  if (impl == AttentionImpl::cudnn && !cudnn_compiled()) {
    fwd.pass = "fwd";
    fwd.shape = s;
    fwd.status = "skipped: built without cuDNN";
    rows.push_back(fwd);
    return;
  }
  if (impl == AttentionImpl::fused)
    fwd.kernel = forced_sm80 ? "sm80" : fused_prefill_kernel(0, head_dim);
  fwd.pass = "fwd";
  fwd.shape = s;
  fwd.flops = forward_flops(s);
  set_fused_prefill_kernel(forced_sm80 ? "sm80" : "auto");
  try {
    time_calls(
        stream, warmup, reps, [&] { gpu.attention(s, q, k, v, o, impl); }, fwd);
  } catch (const Error& e) {
    fwd.status = std::string("failed: ") + e.what();
    cudaGetLastError(); // an allocation that failed leaves its error behind
  }
  rows.push_back(fwd);
  if (no_backward) {
    set_fused_prefill_kernel("auto");
    return;
  }
  Row bwd = fwd;
  // The sm90 backward takes sequences that are a multiple of 64.
  if (bwd.kernel == "sm90" && seq % 64 != 0) bwd.kernel = "sm80";
  bwd.pass = "bwd";
  bwd.flops = 2.5 * fwd.flops;
  bwd.status = "ok";
  try {
    Buffer db = gpu.allocate(qrows, qw), dqb = gpu.allocate(qrows, qw),
           dkb = gpu.allocate(qrows, kw), dvb = gpu.allocate(qrows, kw),
           stats = gpu.allocate_bytes(static_cast<size_t>(batch * heads * seq) * 4);
    const Tensor dout = db.view(qrows, qw, dt), dq = dqb.view(qrows, qw, dt),
                 dk = dkb.view(qrows, kw, dt), dv = dvb.view(qrows, kw, dt);
    gpu.fill_random(dout, GenKey{3, 4, qw, 1.0f}, 0, 0);
    gpu.attention_train(s, q, k, v, o, stats.data(), impl);
    time_calls(
        stream, warmup, reps,
        [&] { gpu.attention_backward(s, q, k, v, o, dout, stats.data(), dq, dk, dv, impl); }, bwd);
  } catch (const Error& e) {
    bwd.status = std::string("failed: ") + e.what();
    cudaGetLastError();
  }
  set_fused_prefill_kernel("auto");
  rows.push_back(bwd);
}

int run(int argc, char** argv) {
  CLI::App app("Attention alone: fused, naive and cudnn forward and backward, in TFLOP/s");
  std::string impls = "fused,naive,cudnn", seqs = "4096,16384,32768", kv_heads = "32,4";
  std::string dtype = "bf16", json, ragged;
  int64_t batch = 1, heads = 32, head_dim = 128;
  int warmup = 3, reps = 10;
  bool non_causal = false, no_backward = false;
  app.add_option("--impl", impls,
                 "Comma list: fused, naive, cudnn, fused-sm80 (the fused kernels forced onto their "
                 "Ampere-style versions, for an A/B run on Hopper)")
      ->capture_default_str();
  app.add_option("--seq", seqs, "Comma list of sequence lengths (queries = keys)")
      ->capture_default_str();
  app.add_option("--kv-heads", kv_heads, "Comma list of key/value head counts")
      ->capture_default_str();
  app.add_option("--heads", heads, "Query heads")->capture_default_str();
  app.add_option("--head-dim", head_dim, "Head dimension")->capture_default_str();
  app.add_option("--batch", batch, "Sequences")->capture_default_str();
  app.add_option("--dtype", dtype, "bf16 | fp16")->capture_default_str();
  app.add_option("--warmup", warmup, "Untimed calls first")->capture_default_str();
  app.add_option("--reps", reps, "Timed calls (median reported)")->capture_default_str();
  app.add_flag("--non-causal", non_causal, "Every query sees every key");
  app.add_flag("--no-backward", no_backward, "Time the forward only");
  app.add_option("--json", json, "Write the rows to this file");
  app.add_option("--ragged", ragged,
                 "Time ragged decode instead (fused, one call beside one call per run of equal "
                 "contexts) over these contexts: lo:hi:n (n spread evenly) or a comma list; "
                 "with --heads, --kv-heads, --head-dim, --dtype");
  CLI11_PARSE(app, argc, argv);
  if (reps < 1 || warmup < 0) {
    std::cerr << "bench_attention: --reps must be >= 1 and --warmup >= 0\n";
    return 2;
  }
  std::vector<std::pair<std::string, AttentionImpl>> chosen;
  try {
    for (const std::string& name : word_list(impls))
      chosen.emplace_back(name,
                          name == "fused-sm80" ? AttentionImpl::fused : parse_attention(name));
  } catch (const UsageError& e) {
    std::cerr << "bench_attention: --impl: " << e.what() << "\n";
    return 2;
  }
  const std::vector<int64_t> ragged_list =
      ragged.empty() ? std::vector<int64_t>{} : ragged_contexts(ragged);
  if (cuda_device_count() == 0) {
    std::cout << "bench_attention: no CUDA device visible; nothing timed\n";
    return 77; // ctest's skip status (SKIP_RETURN_CODE)
  }
  const DType dt = parse_dtype(dtype);
  std::unique_ptr<Backend> gpu = make_cuda_backend(0, dt);
  cudaStream_t stream = static_cast<cudaStream_t>(gpu->stream(Lane::compute));
  if (!ragged.empty())
    return run_ragged(*gpu, stream, ragged_list, int_list(kv_heads), heads, head_dim, dt, warmup,
                      reps);
  std::vector<Row> rows;
  for (int64_t seq : int_list(seqs))
    for (int64_t kvh : int_list(kv_heads)) {
      AttentionShape s;
      s.batch = batch;
      s.seq = s.context = s.capacity = seq;
      s.heads = heads;
      s.kv_heads = kvh;
      s.head_dim = head_dim;
      s.causal = !non_causal;
      const int64_t qw = heads * head_dim, kw = kvh * head_dim, qrows = batch * seq;
      Buffer qb = gpu->allocate(qrows, qw), kb = gpu->allocate(qrows, kw),
             vb = gpu->allocate(qrows, kw), ob = gpu->allocate(qrows, qw);
      const Tensor q = qb.view(qrows, qw, dt), k = kb.view(qrows, kw, dt),
                   v = vb.view(qrows, kw, dt), o = ob.view(qrows, qw, dt);
      gpu->fill_random(q, GenKey{3, 1, qw, 1.0f}, 0, 0);
      gpu->fill_random(k, GenKey{3, 2, kw, 1.0f}, 0, 0);
      gpu->fill_random(v, GenKey{3, 3, kw, 1.0f}, 0, 0);
      for (const auto& [name, impl] : chosen)
        time_impl(*gpu, stream, s, name, impl, q, k, v, o, warmup, reps, no_backward, rows);
    }
  gpu->synchronize();

  print_rows(rows);
  const std::vector<std::string> all = gpu->attention_plans();
  for (const std::string& p : all)
    std::printf("cudnn plan: %s\n", p.c_str());
  if (!json.empty() && !write_json(json, dtype, rows, all)) return 1;
  for (const Row& r : rows)
    if (r.status != "ok" && r.impl == "cudnn" && cudnn_compiled()) return 1;
  return 0;
}

} // namespace
} // namespace ridgeline

int main(int argc, char** argv) {
  try {
    return ridgeline::run(argc, argv);
  } catch (const ridgeline::UsageError& e) {
    std::cerr << "bench_attention: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_attention: " << e.what() << "\n";
    return 1;
  }
}
