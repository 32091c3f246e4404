// The measurement protocol (see protocol.hpp).
#include "app/protocol.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/ranges.hpp"
#include "core/stamped_loop.hpp"
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

namespace {

// One run of the protocol, in its steps: each strategy's recorded loop, the uninstrumented
// rounds, their medians, and the clocks and power over each loop.
class ProtocolRun {
public:
  ProtocolRun(Workload& w, Backend& backend, OpTable& ops, MPI_Comm comm, Watchdog& watchdog,
              const ProtocolOptions& o)
      : m_w(w), m_backend(backend), m_ops(ops), m_comm(comm), m_watchdog(watchdog), m_o(o),
        m_strategies(w.strategies()), m_quiet(backend.clock(), ops),
        m_sub_batches(std::min(kSubBatches, o.iters)) {
    m_result.rounds = interleaved_rounds(m_strategies);
    // NVML samples of this rank's GPU through every loop: clocks that fall under the power cap
    // explain differences between loops that the FLOPs and bytes do not.
    if (o.device >= 0 && o.sample_ms > 0)
      m_sampler = std::make_unique<GpuSampler>(o.device, o.sample_ms);
    if (w.lane_modes())
      m_modes.insert(m_modes.end(), {Workload::Mode::compute_only, Workload::Mode::comm_only});
    // Every iteration of every loop below, for the progress line's count and ETA.
    progress::plan(static_cast<int64_t>(m_strategies) * (o.warmup + o.iters) +
                   static_cast<int64_t>(m_result.rounds) *
                       static_cast<int64_t>(m_strategies * m_modes.size()) * o.iters);
  }

  ProtocolResult run() {
    for (size_t si = 0; si < m_strategies; ++si)
      recorded(si);
    uninstrumented();
    medians();
    clocks();
    return std::move(m_result);
  }

private:
  // Where sub-batch `sub` of (round, strategy, mode) sits in m_marks.
  size_t slot(int round, size_t si, size_t mode, int sub) const {
    return ((static_cast<size_t>(round) * m_strategies + si) * m_modes.size() + mode) *
               static_cast<size_t>(m_sub_batches) +
           static_cast<size_t>(sub);
  }

  // Strategy si's warm-up and timed iterations, every op stamped.
  void recorded(size_t si) {
    const std::string name = m_w.strategy_name(si);
    m_w.select(si);
    m_w.prepare();
    Recorder rec(m_backend.clock(), m_ops);
    m_backend.synchronize();
    m_watchdog.rearm("the barrier before the iterations of " + name);
    RIDGELINE_CHECK(MPI_Barrier(m_comm));
    m_backend.clock().start_epoch();
    m_epochs.push_back(m_sampler ? m_sampler->now_ns() : 0);
    // One phase for the whole loop: inside it only iteration() (atomic stores) marks progress.
    m_watchdog.rearm("recorded iterations of " + name + " (" + std::to_string(m_o.warmup) +
                     " warm-up, " + std::to_string(m_o.iters) + " timed)");
    progress::begin_loop(m_o.warmup + m_o.iters);
    auto iteration = [&](int it) {
      m_watchdog.iteration(it);
      rec.set_iteration(it, it < m_o.warmup);
      const ranges::Scope range([&] {
        return name + (it < m_o.warmup ? ": warm-up " : ": iteration ") + std::to_string(it);
      });
      m_w.set_position(it < m_o.warmup ? it : it - m_o.warmup);
      m_w.step(rec);
    };
    for (int it = 0; it < m_o.warmup; ++it)
      iteration(it);
    std::vector<StampedSample> timed;
    stamped_loop(
        rec, Lane::compute, m_o.iters, 1, [&](int i) { iteration(m_o.warmup + i); }, timed);
    m_w.after_timed(rec);
    m_watchdog.rearm("waiting for the device to finish " + name);
    m_backend.synchronize();
    rec.flush();
    const StampedSample& t = timed.front();
    m_instrumented_windows.push_back(
        {m_epochs.back() + rec.mark_ns(t.begin), m_epochs.back() + rec.mark_ns(t.end)});
    double instrumented = t.ns_per_call(rec);
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &instrumented, 1, MPI_DOUBLE, MPI_MAX, m_comm));
    m_watchdog.rearm("checking " + name);
    m_w.after_flush(rec);
    StrategyMeasurement m;
    m.name = name;
    m.loops.instrumented_ns = instrumented;
    m.rows = std::move(rec.records());
    m_result.strategies.push_back(std::move(m));
  }

  // The same steps without per-op stamps (the instrumentation's own cost), then each lane
  // alone. Strategies take turns round by round, so that a drift of clocks or temperature
  // during the job falls on every strategy alike; each time is the median over the rounds.
  void uninstrumented() {
    m_quiet.set_enabled(false);
    m_backend.synchronize();
    RIDGELINE_CHECK(MPI_Barrier(m_comm));
    for (int round = 0; round < m_result.rounds; ++round)
      for (size_t si = 0; si < m_strategies; ++si) {
        m_w.select(si);
        for (Workload::Mode mode : m_modes)
          quiet_loop(round, si, mode);
      }
    m_watchdog.rearm("waiting for the device to finish the uninstrumented rounds");
    m_backend.synchronize();
    m_quiet.flush();
  }

  // One uninstrumented loop of strategy si in `mode`, marked in m_sub_batches sub-batches.
  void quiet_loop(int round, size_t si, Workload::Mode mode) {
    const char* const mode_texts[] = {"step", "compute only", "communication only"};
    m_watchdog.rearm("uninstrumented iterations (" + m_w.strategy_name(si) + ", " +
                     mode_texts[static_cast<int>(mode)] + ", round " + std::to_string(round) + ")");
    progress::begin_loop(m_o.iters);
    m_w.set_mode(mode);
    stamped_loop(
        m_quiet, Lane::compute, m_o.iters, m_sub_batches,
        [&](int it) {
          m_watchdog.iteration(it);
          const ranges::Scope range([&] {
            const char* loop = mode == Workload::Mode::full           ? " step"
                               : mode == Workload::Mode::compute_only ? " compute_only"
                                                                      : " comm_only";
            return m_w.strategy_name(si) + loop + ": iteration " + std::to_string(it) + " (round " +
                   std::to_string(round) + ")";
          });
          m_w.set_position(it);
          m_w.step(m_quiet);
        },
        m_marks);
    m_w.set_mode(Workload::Mode::full);
  }

  // Each loop's time: the median over its rounds' sub-batch means, slowest rank per sub-batch.
  void medians() {
    std::vector<double> ns;
    for (const StampedSample& m : m_marks)
      ns.push_back(m.ns_per_call(m_quiet));
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, ns.data(), static_cast<int>(ns.size()), MPI_DOUBLE,
                                  MPI_MAX, m_comm));
    auto median_of = [&](size_t si, size_t mode) {
      std::vector<double> means;
      for (int round = 0; round < m_result.rounds; ++round)
        for (int sub = 0; sub < m_sub_batches; ++sub)
          means.push_back(ns[slot(round, si, mode, sub)]);
      return percentile(means, 50);
    };
    for (size_t si = 0; si < m_strategies; ++si) {
      LoopTimes& t = m_result.strategies[si].loops;
      t.plain_ns = median_of(si, 0);
      t.sub_batches = m_sub_batches;
      if (m_modes.size() == 3) {
        t.compute_only_ns = median_of(si, 1);
        t.comm_only_ns = median_of(si, 2);
      }
    }
  }

  // The GPU's clocks and power over each strategy's loops, and every rank's samples.
  void clocks() {
    // The rounds' marks count from the last strategy's epoch.
    const std::vector<GpuSample> samples = m_sampler ? m_sampler->stop() : std::vector<GpuSample>{};
    const char* const mode_names[] = {"step", "compute_only", "comm_only"};
    for (size_t si = 0; si < m_strategies; ++si) {
      Attrs& gpu = m_result.strategies[si].gpu;
      gpu = gpu_means(m_comm, samples, {m_instrumented_windows[si]}, "gpu.instrumented");
      for (size_t mode = 0; mode < m_modes.size(); ++mode) {
        std::vector<Window> windows;
        for (int round = 0; round < m_result.rounds; ++round) {
          const StampedSample& first = m_marks[slot(round, si, mode, 0)];
          const StampedSample& last = m_marks[slot(round, si, mode, m_sub_batches - 1)];
          windows.push_back({m_epochs.back() + m_quiet.mark_ns(first.begin),
                             m_epochs.back() + m_quiet.mark_ns(last.end)});
        }
        for (auto& kv : gpu_means(m_comm, samples, windows, std::string("gpu.") + mode_names[mode]))
          gpu.push_back(std::move(kv));
      }
      if (!gpu.empty()) gpu.emplace_back("gpu.epoch_offset_ns", m_epochs[si] - m_epochs.front());
    }
    // Each rank's samples on the first strategy's epoch, like the file's top-level timelines.
    m_result.samples = samples;
    for (GpuSample& s : m_result.samples)
      s.t_ns -= m_epochs.front();
  }

  Workload& m_w;
  Backend& m_backend;
  OpTable& m_ops;
  MPI_Comm m_comm;
  Watchdog& m_watchdog;
  const ProtocolOptions& m_o;
  const size_t m_strategies;
  ProtocolResult m_result;
  std::unique_ptr<GpuSampler> m_sampler;
  std::vector<int64_t> m_epochs;              // sampler time of each strategy's clock epoch
  std::vector<Window> m_instrumented_windows; // per strategy
  std::vector<Workload::Mode> m_modes = {Workload::Mode::full};
  Recorder m_quiet;
  const int m_sub_batches;
  std::vector<StampedSample> m_marks; // [round][strategy][mode][sub-batch]
};

} // namespace

ProtocolResult run_protocol(Workload& w, Backend& backend, OpTable& ops, MPI_Comm comm,
                            Watchdog& watchdog, const ProtocolOptions& o) {
  return ProtocolRun(w, backend, ops, comm, watchdog, o).run();
}

} // namespace ridgeline
