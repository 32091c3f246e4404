// The measurement protocol (see protocol.hpp).
#include "app/protocol.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/ranges.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

// Rounds of the interleaved uninstrumented loops when a job compares strategies (the reported
// step, compute-only and communication-only times are medians over them).
constexpr int kInterleavedRounds = 5;

// Sub-batches each uninstrumented loop is timed in: a loop has no per-iteration stamps, and the
// median of its sub-batches' means keeps one stall from moving the figure, as it would a mean.
constexpr int kSubBatches = 5;

// A stretch of the run on the samples' time base (ns since the sampler started).
struct Window {
  int64_t begin_ns = 0, end_ns = 0;
};

// NVML means over windows, averaged over every rank's GPU (every rank calls).
Attrs gpu_means(MPI_Comm comm, const std::vector<GpuSample>& samples,
                const std::vector<Window>& windows, const std::string& prefix) {
  double sums[4] = {0, 0, 0, 0}; // SM clock, power, power-capped samples, samples
  for (const GpuSample& s : samples)
    for (const Window& w : windows)
      if (s.t_ns >= w.begin_ns && s.t_ns <= w.end_ns && s.sm_clock_mhz >= 0) {
        sums[0] += static_cast<double>(s.sm_clock_mhz);
        sums[1] += s.power_w >= 0 ? s.power_w : s.power_avg_w;
        sums[2] +=
            s.clock_event_reasons >= 0 && (s.clock_event_reasons & kClockEventPowerCap) ? 1 : 0;
        sums[3] += 1;
      }
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_DOUBLE, MPI_SUM, comm));
  if (sums[3] == 0) return {};
  return {{prefix + ".sm_clock_mhz", sums[0] / sums[3]},
          {prefix + ".power_w", sums[1] / sums[3]},
          {prefix + ".power_capped_share", sums[2] / sums[3]},
          {prefix + ".samples", static_cast<int64_t>(sums[3])}};
}

} // namespace

int interleaved_rounds(size_t strategies) {
  return strategies > 1 ? kInterleavedRounds : 1;
}

Table samples_table(const std::vector<GpuSample>& samples) {
  std::vector<int64_t> t, sm, mem, reasons;
  std::vector<double> power, power_avg, temp;
  for (const GpuSample& s : samples) {
    t.push_back(s.t_ns);
    sm.push_back(s.sm_clock_mhz);
    mem.push_back(s.mem_clock_mhz);
    power.push_back(s.power_w);
    power_avg.push_back(s.power_avg_w);
    temp.push_back(s.temp_c);
    reasons.push_back(s.clock_event_reasons);
  }
  return {{"t_ns", t},
          {"sm_clock_mhz", sm},
          {"mem_clock_mhz", mem},
          {"power_w", power},
          {"power_avg_w", power_avg},
          {"temp_c", temp},
          {"clock_event_reasons", reasons}};
}

ProtocolResult run_protocol(Workload& w, Backend& backend, OpTable& ops, MPI_Comm comm,
                            Watchdog& watchdog, const ProtocolOptions& o) {
  ProtocolResult result;
  const size_t strategies = w.strategies();
  result.rounds = interleaved_rounds(strategies);
  // NVML samples of this rank's GPU through every loop: clocks that fall under the power cap
  // explain differences between loops that the FLOPs and bytes do not.
  std::unique_ptr<GpuSampler> sampler;
  if (o.device >= 0 && o.sample_ms > 0)
    sampler = std::make_unique<GpuSampler>(o.device, o.sample_ms);
  std::vector<int64_t> epochs;              // sampler time of each strategy's clock epoch
  std::vector<Window> instrumented_windows; // per strategy

  auto per_iter = [&](const Recorder& rec, std::pair<size_t, size_t> m, int iters) {
    return static_cast<double>(rec.mark_ns(m.second) - rec.mark_ns(m.first)) / iters;
  };
  std::vector<Workload::Mode> modes = {Workload::Mode::full};
  if (w.lane_modes())
    modes.insert(modes.end(), {Workload::Mode::compute_only, Workload::Mode::comm_only});
  // Every iteration of every loop below, for the progress line's count and ETA.
  progress::plan(static_cast<int64_t>(strategies) * (o.warmup + o.iters) +
                 static_cast<int64_t>(result.rounds) *
                     static_cast<int64_t>(strategies * modes.size()) * o.iters);
  for (size_t si = 0; si < strategies; ++si) {
    const std::string name = w.strategy_name(si);
    w.select(si);
    w.prepare();
    Recorder rec(backend.clock(), ops);
    backend.synchronize();
    watchdog.rearm("the barrier before the iterations of " + name);
    RIDGELINE_CHECK(MPI_Barrier(comm));
    backend.clock().start_epoch();
    epochs.push_back(sampler ? sampler->now_ns() : 0);
    size_t timed_start = 0;
    // One phase for the whole loop: inside it only iteration() (atomic stores) marks progress.
    watchdog.rearm("recorded iterations of " + name + " (" + std::to_string(o.warmup) +
                   " warm-up, " + std::to_string(o.iters) + " timed)");
    progress::begin_loop(o.warmup + o.iters);
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      watchdog.iteration(it);
      if (it == o.warmup) timed_start = rec.mark(Lane::compute);
      rec.set_iteration(it, it < o.warmup);
      const ranges::Scope range([&] {
        return name + (it < o.warmup ? ": warm-up " : ": iteration ") + std::to_string(it);
      });
      w.set_position(it < o.warmup ? it : it - o.warmup);
      w.step(rec);
    }
    const size_t timed_end = rec.mark(Lane::compute);
    w.after_timed(rec);
    watchdog.rearm("waiting for the device to finish " + name);
    backend.synchronize();
    rec.flush();
    instrumented_windows.push_back(
        {epochs.back() + rec.mark_ns(timed_start), epochs.back() + rec.mark_ns(timed_end)});
    double instrumented = per_iter(rec, {timed_start, timed_end}, o.iters);
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &instrumented, 1, MPI_DOUBLE, MPI_MAX, comm));
    watchdog.rearm("checking " + name);
    w.after_flush(rec);
    StrategyMeasurement m;
    m.name = name;
    m.loops.instrumented_ns = instrumented;
    m.rows = std::move(rec.records());
    result.strategies.push_back(std::move(m));
  }

  // The same steps without per-op stamps (the instrumentation's own cost), then each lane
  // alone. Strategies take turns round by round, so that a drift of clocks or temperature
  // during the job falls on every strategy alike; each time is the median over the rounds.
  Recorder quiet(backend.clock(), ops);
  quiet.set_enabled(false);
  backend.synchronize();
  RIDGELINE_CHECK(MPI_Barrier(comm));
  // [round][strategy][mode][sub-batch]: a sub-batch's marks and its iterations.
  struct SubBatch {
    size_t begin = 0, end = 0;
    int iters = 0;
  };
  std::vector<SubBatch> marks;
  const int sub_batches = std::min(kSubBatches, o.iters);
  auto slot = [&](int round, size_t si, size_t mode, int sub) {
    return ((static_cast<size_t>(round) * strategies + si) * modes.size() + mode) *
               static_cast<size_t>(sub_batches) +
           static_cast<size_t>(sub);
  };
  const char* const mode_texts[] = {"step", "compute only", "communication only"};
  for (int round = 0; round < result.rounds; ++round)
    for (size_t si = 0; si < strategies; ++si) {
      w.select(si);
      for (Workload::Mode mode : modes) {
        watchdog.rearm("uninstrumented iterations (" + w.strategy_name(si) + ", " +
                       mode_texts[static_cast<int>(mode)] + ", round " + std::to_string(round) +
                       ")");
        progress::begin_loop(o.iters);
        w.set_mode(mode);
        size_t begin = quiet.mark(Lane::compute);
        int sub_begin = 0;
        for (int it = 0; it < o.iters; ++it) {
          watchdog.iteration(it);
          const ranges::Scope range([&] {
            const char* loop = mode == Workload::Mode::full           ? " step"
                               : mode == Workload::Mode::compute_only ? " compute_only"
                                                                      : " comm_only";
            return w.strategy_name(si) + loop + ": iteration " + std::to_string(it) + " (round " +
                   std::to_string(round) + ")";
          });
          w.set_position(it);
          w.step(quiet);
          // Sub-batch j ends after iteration (j + 1) x iters / sub_batches - 1.
          const int sub = static_cast<int>(marks.size() % static_cast<size_t>(sub_batches));
          if (it + 1 == (sub + 1) * o.iters / sub_batches) {
            const size_t end = quiet.mark(Lane::compute);
            marks.push_back({begin, end, it + 1 - sub_begin});
            begin = end;
            sub_begin = it + 1;
          }
        }
        w.set_mode(Workload::Mode::full);
      }
    }
  watchdog.rearm("waiting for the device to finish the uninstrumented rounds");
  backend.synchronize();
  quiet.flush();
  std::vector<double> ns;
  for (const SubBatch& m : marks)
    ns.push_back(per_iter(quiet, {m.begin, m.end}, m.iters));
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, ns.data(), static_cast<int>(ns.size()), MPI_DOUBLE,
                                MPI_MAX, comm));
  auto median_of = [&](size_t si, size_t mode) {
    std::vector<double> means;
    for (int round = 0; round < result.rounds; ++round)
      for (int sub = 0; sub < sub_batches; ++sub)
        means.push_back(ns[slot(round, si, mode, sub)]);
    return percentile(means, 50);
  };
  for (size_t si = 0; si < strategies; ++si) {
    LoopTimes& t = result.strategies[si].loops;
    t.plain_ns = median_of(si, 0);
    t.sub_batches = sub_batches;
    if (modes.size() == 3) {
      t.compute_only_ns = median_of(si, 1);
      t.comm_only_ns = median_of(si, 2);
    }
  }
  // The rounds' marks count from the last strategy's epoch.
  const std::vector<GpuSample> samples = sampler ? sampler->stop() : std::vector<GpuSample>{};
  const char* const mode_names[] = {"step", "compute_only", "comm_only"};
  for (size_t si = 0; si < strategies; ++si) {
    Attrs& gpu = result.strategies[si].gpu;
    gpu = gpu_means(comm, samples, {instrumented_windows[si]}, "gpu.instrumented");
    for (size_t mode = 0; mode < modes.size(); ++mode) {
      std::vector<Window> windows;
      for (int round = 0; round < result.rounds; ++round) {
        const SubBatch& first = marks[slot(round, si, mode, 0)];
        const SubBatch& last = marks[slot(round, si, mode, sub_batches - 1)];
        windows.push_back(
            {epochs.back() + quiet.mark_ns(first.begin), epochs.back() + quiet.mark_ns(last.end)});
      }
      for (auto& kv : gpu_means(comm, samples, windows, std::string("gpu.") + mode_names[mode]))
        gpu.push_back(std::move(kv));
    }
    if (!gpu.empty()) gpu.emplace_back("gpu.epoch_offset_ns", epochs[si] - epochs.front());
  }
  // Each rank's samples on the first strategy's epoch, like the file's top-level timelines.
  result.samples = samples;
  for (GpuSample& s : result.samples)
    s.t_ns -= epochs.front();
  return result;
}

} // namespace ridgeline
