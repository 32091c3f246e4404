// An MoE layer's expert GEMMs alone: the gate/up and down grouped GEMMs of the rows one rank
// holds after a dispatch, under each GroupedGemm choice (loop, streams, cublas), beside the dense
// GEMMs of the same total rows (one weight matrix): the ratio is how much of the dense GEMM's
// rate the experts keep. Rows go to experts by seeded uniform draws, as `--routing uniform`
// routes them. Two layouts: "pairs" (a group per source rank and expert, as the rows arrive from
// an all-to-all-v over --sources ranks) and "experts" (a group per expert, the sources' rows of
// an expert adjacent). CUDA events, median of --reps calls after --warmup. Exits 77 (skipped)
// with a note when no GPU is visible.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "models/backend.hpp"
#include "models/cuda_backend.hpp"
#include "tests/support/event_times.hpp"

namespace ridgeline {
namespace {

// Median of `reps` calls, each bracketed by its own event pair on `stream`, in milliseconds.
double median_ms(cudaStream_t stream, int warmup, int reps, const std::function<void()>& call) {
  const std::vector<double> ms = event_times_ms(stream, warmup, reps, call);
  return ms[ms.size() / 2];
}

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    out.push_back(item);
  return out;
}

struct Groups {
  std::vector<int64_t> offsets; ///< groups.size() + 1 row offsets
  std::vector<int64_t> expert;  ///< each group's expert
};

// Seeded uniform draws of `rows` rows from each of `sources` ranks over `experts` experts.
Groups route(int64_t rows, int64_t sources, int64_t experts, bool by_expert, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int64_t> pick(0, experts - 1);
  std::vector<int64_t> count(static_cast<size_t>(sources * experts), 0);
  for (int64_t s = 0; s < sources; ++s)
    for (int64_t r = 0; r < rows / sources; ++r)
      ++count[static_cast<size_t>(s * experts + pick(gen))];
  Groups g{{0}, {}};
  for (int64_t i = 0; i < sources * experts; ++i) {
    const int64_t s = by_expert ? i % sources : i / experts,
                  e = by_expert ? i / sources : i % experts;
    const int64_t n = count[static_cast<size_t>(s * experts + e)];
    if (by_expert && s > 0) {
      g.offsets.back() += n; // the expert's group grows by this source's rows
      continue;
    }
    g.offsets.push_back(g.offsets.back() + n);
    g.expert.push_back(e);
  }
  return g;
}

int run(int argc, char** argv) {
  CLI::App app("MoE expert GEMMs alone: grouped (loop, streams, cublas) beside dense, in TFLOP/s");
  int64_t hidden = 7168, ffn = 2048, experts = 64, sources = 4;
  std::string rows_list = "32768,1024", modes = "loop,streams,cublas", algo = "heuristic";
  int warmup = 3, reps = 10;
  app.add_option("--hidden", hidden, "Model width (k of gate/up)")->capture_default_str();
  app.add_option("--ffn", ffn, "One expert's FFN width")->capture_default_str();
  app.add_option("--experts", experts, "Experts on this rank")->capture_default_str();
  app.add_option("--sources", sources, "Ranks the rows come from (the EP group)")
      ->capture_default_str();
  app.add_option("--rows", rows_list, "Comma list: rows this rank holds (tokens x top-k)")
      ->capture_default_str();
  app.add_option("--modes", modes, "Comma list of loop, streams, cublas")->capture_default_str();
  app.add_option("--gemm-algo", algo,
                 "heuristic (cuBLASLt's first choice) or search (the fastest of its candidates, "
                 "timed once per shape), for the dense GEMMs and every group's")
      ->check(CLI::IsMember({"heuristic", "search"}))
      ->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--reps", reps)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  for (const std::string& mode : words(modes))
    if (mode != "loop" && mode != "streams" && mode != "cublas")
      throw UsageError("--modes: '" + mode + "' is not loop, streams or cublas");
  if (cuda_device_count() == 0) {
    std::cout << "bench_grouped_gemm: no CUDA device visible; nothing timed\n";
    return 77; // ctest's skip status (SKIP_RETURN_CODE)
  }
  std::unique_ptr<Backend> gpu = make_cuda_backend(0, DType::bf16);
  gpu->set_gemm_algo(algo == "search" ? GemmAlgo::search : GemmAlgo::heuristic);
  const cudaStream_t stream = static_cast<cudaStream_t>(gpu->stream(Lane::compute));
  const DType dt = DType::bf16;
  std::vector<Buffer> up_w, down_w;
  std::vector<Tensor> up, down;
  for (int64_t e = 0; e < experts; ++e) {
    up_w.push_back(gpu->allocate(2 * ffn, hidden));
    down_w.push_back(gpu->allocate(hidden, ffn));
    up.push_back(up_w.back().view(2 * ffn, hidden, dt));
    down.push_back(down_w.back().view(hidden, ffn, dt));
    gpu->fill_random(up.back(), GenKey{7, static_cast<uint64_t>(2 * e), hidden, 0.02f}, 0, 0);
    gpu->fill_random(down.back(), GenKey{7, static_cast<uint64_t>(2 * e + 1), ffn, 0.02f}, 0, 0);
  }
  std::printf("%-8s %-8s %-8s %7s %10s %9s %8s\n", "rows", "layout", "mode", "groups", "ms",
              "TFLOP/s", "x dense");
  for (const std::string& item : words(rows_list)) {
    const int64_t rows = std::stoll(item);
    Buffer xb = gpu->allocate(rows, hidden), gub = gpu->allocate(rows, 2 * ffn),
           actb = gpu->allocate(rows, ffn), outb = gpu->allocate(rows, hidden);
    const Tensor x = xb.view(rows, hidden, dt), gu = gub.view(rows, 2 * ffn, dt),
                 act = actb.view(rows, ffn, dt), out = outb.view(rows, hidden, dt);
    gpu->fill_random(x, GenKey{7, 999, hidden, 1.0f}, 0, 0);
    gpu->fill_random(act, GenKey{7, 998, ffn, 1.0f}, 0, 0);
    const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(hidden) *
                         static_cast<double>(3 * ffn);
    const double dense = median_ms(stream, warmup, reps, [&] {
      gpu->gemm(x, up[0], gu);
      gpu->gemm(act, down[0], out);
    });
    std::printf("%-8lld %-8s %-8s %7d %10.3f %9.1f %8.3f\n", static_cast<long long>(rows), "dense",
                "-", 1, dense, flops / dense * 1e-9, 1.0);
    for (const bool by_expert : {false, true}) {
      const Groups g = route(rows, sources, experts, by_expert, 42);
      std::vector<Tensor> gw_up, gw_down;
      for (int64_t e : g.expert) {
        gw_up.push_back(up[static_cast<size_t>(e)]);
        gw_down.push_back(down[static_cast<size_t>(e)]);
      }
      const int64_t held = g.offsets.back();
      for (const std::string& mode : words(modes)) {
        gpu->set_grouped_gemm(mode == "loop"     ? GroupedGemm::loop
                              : mode == "cublas" ? GroupedGemm::cublas
                                                 : GroupedGemm::streams);
        const double ms = median_ms(stream, warmup, reps, [&] {
          gpu->grouped_gemm(x.rows_slice(0, held), gw_up, g.offsets, gu.rows_slice(0, held));
          gpu->grouped_gemm(act.rows_slice(0, held), gw_down, g.offsets, out.rows_slice(0, held));
        });
        const double f = flops * static_cast<double>(held) / static_cast<double>(rows);
        std::printf("%-8lld %-8s %-8s %7zu %10.3f %9.1f %8.3f\n", static_cast<long long>(rows),
                    by_expert ? "experts" : "pairs", mode.c_str(), g.expert.size(), ms,
                    f / ms * 1e-9, (f / ms) / (flops / dense));
      }
    }
  }
  return 0;
}

} // namespace
} // namespace ridgeline

int main(int argc, char** argv) {
  try {
    return ridgeline::run(argc, argv);
  } catch (const ridgeline::UsageError& e) {
    std::cerr << "bench_grouped_gemm: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_grouped_gemm: " << e.what() << "\n";
    return 1;
  }
}
