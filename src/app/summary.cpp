// Timeline reduction: every rank's own timeline into the run summary, through reductions whose
// size does not grow with the number of ranks.
#include "app/summary.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <tuple>
#include <type_traits>

#include "core/error.hpp"
#include "core/stats.hpp"

namespace ridgeline {
namespace {

// Marks an entry no rank has (every duration is >= 0, so MPI_MAX keeps any real one).
constexpr int64_t kAbsent = -1;
// Elements one reduction carries at most: MPI counts are ints, and the collective instances of
// a slice of iterations (ops x layers x microbatches x iterations) stay within it.
constexpr size_t kPiece = size_t{1} << 24;

bool is_comm(OpKind k) {
  return k == OpKind::collective || k == OpKind::p2p;
}

int64_t duration(const TimelineRecord& r) {
  return r.t_end_ns - r.t_start_ns;
}

template <class T> void allreduce(MPI_Comm comm, std::vector<T>& values, MPI_Op op) {
  const MPI_Datatype type = std::is_same_v<T, double> ? MPI_DOUBLE : MPI_INT64_T;
  for (size_t at = 0; at < values.size(); at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, values.size() - at));
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, values.data() + at, n, type, op, comm));
  }
}

// FNV-1a over the op names and kinds: every rank's op ids must mean the same ops.
int64_t op_table_hash(const OpTable& ops) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (size_t id = 0; id < ops.size(); ++id) {
    for (char c : ops.name(static_cast<int32_t>(id)))
      mix(static_cast<unsigned char>(c));
    mix(0);
    mix(static_cast<unsigned char>(ops.kind(static_cast<int32_t>(id))));
  }
  return static_cast<int64_t>(h >> 1);
}

// The entries some rank had, in index order.
std::vector<double> present(std::vector<int64_t>::const_iterator first,
                            std::vector<int64_t>::const_iterator last) {
  std::vector<double> v;
  for (auto it = first; it != last; ++it)
    if (*it != kAbsent) v.push_back(static_cast<double>(*it));
  return v;
}

// The midpoint of [lo, hi] without overflow.
int64_t midpoint(int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>((static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo)) / 2);
}

} // namespace

std::vector<int64_t> select_kth(MPI_Comm comm, const std::vector<std::vector<int64_t>>& sets,
                                const std::vector<std::pair<size_t, int64_t>>& queries) {
  const size_t q = queries.size();
  std::vector<int64_t> lo(q, INT64_MAX), hi(q, INT64_MIN);
  for (size_t i = 0; i < q; ++i) {
    const std::vector<int64_t>& set = sets.at(queries[i].first);
    if (!set.empty()) lo[i] = set.front(), hi[i] = set.back();
  }
  allreduce(comm, lo, MPI_MIN);
  allreduce(comm, hi, MPI_MAX);
  // Invariant: the answer lies in [lo, hi]; each round halves every open range with one
  // reduction of counts (at most 64 rounds for 64-bit values).
  std::vector<int64_t> at_most(q);
  while (true) {
    bool open = false;
    for (size_t i = 0; i < q; ++i) {
      at_most[i] = 0;
      if (lo[i] >= hi[i]) continue;
      open = true;
      const std::vector<int64_t>& set = sets[queries[i].first];
      at_most[i] = std::upper_bound(set.begin(), set.end(), midpoint(lo[i], hi[i])) - set.begin();
    }
    if (!open) break; // the same on every rank: lo and hi are
    allreduce(comm, at_most, MPI_SUM);
    for (size_t i = 0; i < q; ++i) {
      if (lo[i] >= hi[i]) continue;
      const int64_t mid = midpoint(lo[i], hi[i]);
      if (at_most[i] >= queries[i].second + 1)
        hi[i] = mid;
      else
        lo[i] = mid + 1;
    }
  }
  return lo;
}

namespace {

// One summary, step by step: every step's reductions are collective, and every rank takes the
// steps in the same order.
class TimelineSummary {
public:
  TimelineSummary(MPI_Comm comm, const OpTable& ops, const std::vector<TimelineRecord>& mine)
      : m_comm(comm), m_ops(ops), m_mine(mine), m_op_count(ops.size()) {
    RIDGELINE_CHECK(MPI_Comm_rank(comm, &m_rank));
    RIDGELINE_CHECK(MPI_Comm_size(comm, &m_size));
  }

  RunSummary run() {
    check_rows();
    reduce_extents();
    reduce_steps();
    collect_timed_rows();
    reduce_op_facts();
    collect_instances();
    select_medians();
    size_t query = 0;
    for (size_t id = 0; id < m_op_count; ++id)
      if (m_counts[m_op_count + id] != 0) m_s.ops.push_back(aggregate(id, query));
    return std::move(m_s);
  }

private:
  using Key = std::tuple<int32_t, int32_t, int32_t>;

  // The ranks' op tables must agree, and every row must name one of their ops.
  void check_rows() const {
    const size_t K = m_op_count;
    std::vector<int64_t> low = {static_cast<int64_t>(K), op_table_hash(m_ops)}, high = low;
    allreduce(m_comm, low, MPI_MIN);
    allreduce(m_comm, high, MPI_MAX);
    if (low != high)
      throw Error(
          "the ranks recorded different op tables: their timelines cannot be summarised together");
    for (const TimelineRecord& r : m_mine)
      if (r.op_id < 0 || static_cast<size_t>(r.op_id) >= K || r.iteration < 0)
        throw Error("a timeline row has op id " + std::to_string(r.op_id) + " and iteration " +
                    std::to_string(r.iteration) + " (" + std::to_string(K) + " ops)");
  }

  // Extents, in one reduction: iterations; layers and microbatches of timed comm instances.
  void reduce_extents() {
    m_extent = {0, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
    for (const TimelineRecord& r : m_mine) {
      m_extent[0] = std::max<int64_t>(m_extent[0], r.iteration + 1);
      if (r.warmup || !is_comm(m_ops.kind(r.op_id))) continue;
      m_extent[1] = std::max<int64_t>(m_extent[1], r.layer);
      m_extent[2] = std::max<int64_t>(m_extent[2], -static_cast<int64_t>(r.layer));
      m_extent[3] = std::max<int64_t>(m_extent[3], r.microbatch);
      m_extent[4] = std::max<int64_t>(m_extent[4], -static_cast<int64_t>(r.microbatch));
    }
    allreduce(m_comm, m_extent, MPI_MAX);
    m_iterations = static_cast<size_t>(m_extent[0]);
  }

  // Steps: per iteration, this rank's span from its first op start to its last op end; the
  // step is the longest rank's. Timed iterations in [0, I), warm-up ones in [I, 2I).
  void reduce_steps() {
    const size_t I = m_iterations;
    std::vector<int64_t> first(2 * I, INT64_MAX), last(2 * I, INT64_MIN), span(2 * I, kAbsent);
    for (const TimelineRecord& r : m_mine) {
      const size_t at = (r.warmup ? I : 0) + static_cast<size_t>(r.iteration);
      first[at] = std::min(first[at], r.t_start_ns);
      last[at] = std::max(last[at], r.t_end_ns);
    }
    for (size_t at = 0; at < 2 * I; ++at)
      if (first[at] != INT64_MAX) span[at] = last[at] - first[at];
    allreduce(m_comm, span, MPI_MAX);
    m_s.step_ns = present(span.begin(), span.begin() + static_cast<std::ptrdiff_t>(I));
    m_s.warmup_step_ns = present(span.begin() + static_cast<std::ptrdiff_t>(I), span.end());
    m_s.step = summarize(m_s.step_ns);
    m_s.warmup_to_steady =
        static_cast<int64_t>(warmup_to_steady(m_s.warmup_step_ns, m_s.step.p50, 0.10));
  }

  // Per op: timed rows and ranks having the op; the op's time per iteration: the union of its
  // instances' intervals on the rank (instances in flight together, such as data-parallel
  // buckets, count once), max over ranks; the last row of the highest rank having it gives the
  // lane, and its costs per instance are the mean over that rank's rows (buckets differ).
  void collect_timed_rows() {
    const size_t K = m_op_count;
    m_counts.assign(2 * K, 0);
    m_sample.assign(K, nullptr);
    m_cost_sums.assign(3 * K, 0.0);
    m_uniform.assign(K, 1);
    // Instances: compute ops per (layer, microbatch, iteration) of this rank; comm ops below.
    m_local.resize(K);
    std::vector<const TimelineRecord*> timed;
    for (const TimelineRecord& r : m_mine) {
      if (r.warmup) continue;
      const size_t id = static_cast<size_t>(r.op_id);
      ++m_counts[id];
      if (m_sample[id] != nullptr &&
          (m_sample[id]->flops != r.flops || m_sample[id]->hbm_bytes != r.hbm_bytes ||
           m_sample[id]->comm_bytes != r.comm_bytes))
        m_uniform[id] = 0;
      m_sample[id] = &r;
      m_cost_sums[3 * id] += r.flops;
      m_cost_sums[3 * id + 1] += r.hbm_bytes;
      m_cost_sums[3 * id + 2] += r.comm_bytes;
      timed.push_back(&r);
      if (is_comm(m_ops.kind(r.op_id))) {
        m_comm_rows.push_back(&r);
      } else {
        int64_t& t = m_local[id][Key{r.layer, r.microbatch, r.iteration}];
        t = std::max(t, duration(r));
      }
    }
    set_per_step(timed);
  }

  // Each op's time per iteration on this rank: the union of its timed rows' intervals.
  void set_per_step(std::vector<const TimelineRecord*>& timed) {
    m_per_step.assign(m_op_count * m_iterations, kAbsent);
    std::sort(timed.begin(), timed.end(), [](const TimelineRecord* a, const TimelineRecord* b) {
      return std::tie(a->op_id, a->iteration, a->t_start_ns) <
             std::tie(b->op_id, b->iteration, b->t_start_ns);
    });
    for (size_t i = 0; i < timed.size();) {
      const TimelineRecord& first = *timed[i];
      int64_t covered = 0, begin = first.t_start_ns, end = first.t_end_ns;
      for (; i < timed.size() && timed[i]->op_id == first.op_id &&
             timed[i]->iteration == first.iteration;
           ++i) {
        if (timed[i]->t_start_ns > end) {
          covered += end - begin;
          begin = timed[i]->t_start_ns;
        }
        end = std::max(end, timed[i]->t_end_ns);
      }
      m_per_step[static_cast<size_t>(first.op_id) * m_iterations +
                 static_cast<size_t>(first.iteration)] = covered + end - begin;
    }
  }

  // The per-op facts over the ranks: counts, the owner of each op's lane and costs, the time
  // per step.
  void reduce_op_facts() {
    const size_t K = m_op_count;
    std::vector<int64_t> owner(K, -1);
    for (size_t id = 0; id < K; ++id) {
      m_counts[K + id] = m_sample[id] ? 1 : 0;
      owner[id] = m_sample[id] ? m_rank : -1;
      for (int c = 0; c < 3 && m_counts[id] > 0; ++c)
        m_cost_sums[3 * id + static_cast<size_t>(c)] /= static_cast<double>(m_counts[id]);
    }
    allreduce(m_comm, m_counts, MPI_SUM);
    allreduce(m_comm, owner, MPI_MAX);
    allreduce(m_comm, m_per_step, MPI_MAX);
    m_costs.assign(4 * K, 0.0); // lane, flops, hbm_bytes, comm_bytes
    for (size_t id = 0; id < K; ++id)
      if (owner[id] == m_rank) {
        const TimelineRecord& sample = *m_sample[id];
        const bool uniform = m_uniform[id] != 0;
        m_costs[4 * id] = sample.lane;
        m_costs[4 * id + 1] = uniform ? sample.flops : m_cost_sums[3 * id];
        m_costs[4 * id + 2] = uniform ? sample.hbm_bytes : m_cost_sums[3 * id + 1];
        m_costs[4 * id + 3] = uniform ? sample.comm_bytes : m_cost_sums[3 * id + 2];
      }
    allreduce(m_comm, m_costs, MPI_SUM);
  }

  // Each op's instance durations as a set spread over the ranks: compute instances stay with
  // their rank; comm instances are reduced (max over ranks) slice by slice of iterations, and
  // each slice's instances are kept by one rank in turn.
  void collect_instances() {
    const size_t K = m_op_count;
    m_sets.resize(K);
    for (size_t id = 0; id < K; ++id)
      for (const auto& kv : m_local[id])
        m_sets[id].push_back(kv.second);
    std::vector<size_t> comm_ops;
    for (size_t id = 0; id < K; ++id)
      if (is_comm(m_ops.kind(static_cast<int32_t>(id)))) comm_ops.push_back(id);
    if (!comm_ops.empty() && m_extent[1] != INT64_MIN && m_iterations > 0)
      collect_comm_instances(comm_ops);
  }

  void collect_comm_instances(const std::vector<size_t>& comm_ops) {
    const size_t I = m_iterations;
    const int64_t layer0 = -m_extent[2], mb0 = -m_extent[4];
    const size_t L = static_cast<size_t>(m_extent[1] - layer0 + 1);
    const size_t M = static_cast<size_t>(m_extent[3] - mb0 + 1);
    std::vector<size_t> slot(m_op_count, 0);
    for (size_t c = 0; c < comm_ops.size(); ++c)
      slot[comm_ops[c]] = c;
    const size_t per_iteration = comm_ops.size() * L * M;
    const size_t width = std::max<size_t>(1, kPiece / per_iteration);
    std::sort(m_comm_rows.begin(), m_comm_rows.end(),
              [](const TimelineRecord* a, const TimelineRecord* b) {
                return a->iteration < b->iteration;
              });
    auto row = m_comm_rows.begin();
    std::vector<int64_t> slice;
    for (size_t begin = 0, turn = 0; begin < I; begin += width, ++turn) {
      const size_t end = std::min(I, begin + width);
      slice.assign((end - begin) * per_iteration, kAbsent);
      for (; row != m_comm_rows.end() && static_cast<size_t>((*row)->iteration) < end; ++row) {
        const TimelineRecord& r = **row;
        const size_t at = (((static_cast<size_t>(r.iteration) - begin) * comm_ops.size() +
                            slot[static_cast<size_t>(r.op_id)]) *
                               L +
                           static_cast<size_t>(r.layer - layer0)) *
                              M +
                          static_cast<size_t>(r.microbatch - mb0);
        slice[at] = std::max(slice[at], duration(r));
      }
      allreduce(m_comm, slice, MPI_MAX);
      if (static_cast<int>(turn % static_cast<size_t>(m_size)) != m_rank) continue;
      for (size_t at = 0; at < slice.size(); ++at)
        if (slice[at] != kAbsent)
          m_sets[comm_ops[(at / (L * M)) % comm_ops.size()]].push_back(slice[at]);
    }
  }

  // Each op's instance count and summed duration over the ranks, and the order statistics
  // either side of its median.
  void select_medians() {
    const size_t K = m_op_count;
    m_totals.assign(2 * K, 0); // instances, summed duration
    for (size_t id = 0; id < K; ++id) {
      std::sort(m_sets[id].begin(), m_sets[id].end());
      m_totals[id] = static_cast<int64_t>(m_sets[id].size());
      for (int64_t v : m_sets[id])
        m_totals[K + id] += v;
    }
    allreduce(m_comm, m_totals, MPI_SUM);
    // The median as numpy interpolates it: the order statistics either side of (n - 1) / 2.
    std::vector<std::pair<size_t, int64_t>> queries;
    for (size_t id = 0; id < K; ++id) {
      if (m_totals[id] == 0) continue;
      const int64_t lo = (m_totals[id] - 1) / 2;
      queries.emplace_back(id, lo);
      queries.emplace_back(id, std::min(lo + 1, m_totals[id] - 1));
    }
    m_order = select_kth(m_comm, m_sets, queries);
  }

  // Op `id`'s aggregate; `query` is the index of its median's order statistics, if it has any.
  OpAggregate aggregate(size_t id, size_t& query) const {
    const size_t K = m_op_count, I = m_iterations;
    const int64_t ranks_with_op = m_counts[K + id];
    OpAggregate a;
    a.name = m_ops.name(static_cast<int32_t>(id));
    a.kind = op_kind_name(m_ops.kind(static_cast<int32_t>(id)));
    a.lane = lane_name(static_cast<Lane>(static_cast<int>(m_costs[4 * id])));
    a.count = m_counts[id] / ranks_with_op;
    if (m_totals[id] > 0) {
      const double pos = 0.5 * static_cast<double>(m_totals[id] - 1);
      const double frac = pos - std::floor(pos);
      const double lo = static_cast<double>(m_order[query]),
                   hi = static_cast<double>(m_order[query + 1]);
      query += 2;
      a.p50_ns = lo + (hi - lo) * frac;
      a.mean_ns = static_cast<double>(m_totals[K + id]) / static_cast<double>(m_totals[id]);
    }
    const auto row_begin = m_per_step.begin() + static_cast<std::ptrdiff_t>(id * I);
    a.per_step_p50_ns =
        percentile(present(row_begin, row_begin + static_cast<std::ptrdiff_t>(I)), 50);
    a.share = m_s.step.p50 > 0 ? a.per_step_p50_ns / m_s.step.p50 : 0;
    a.flops = m_costs[4 * id + 1];
    a.hbm_bytes = m_costs[4 * id + 2];
    a.comm_bytes = m_costs[4 * id + 3];
    if (a.p50_ns > 0) {
      a.achieved_tflops = a.flops / a.p50_ns / 1e3;
      a.achieved_gbps =
          (is_comm(m_ops.kind(static_cast<int32_t>(id))) ? a.comm_bytes : a.hbm_bytes) / a.p50_ns;
    }
    return a;
  }

  MPI_Comm m_comm;
  const OpTable& m_ops;
  const std::vector<TimelineRecord>& m_mine;
  int m_rank = 0, m_size = 1;
  const size_t m_op_count;
  size_t m_iterations = 0;
  std::vector<int64_t> m_extent;
  RunSummary m_s;
  std::vector<int64_t> m_counts;               ///< per op: timed rows, then ranks having it
  std::vector<int64_t> m_per_step;             ///< op x iteration: its time in the step
  std::vector<const TimelineRecord*> m_sample; ///< per op: its last timed row here
  std::vector<double> m_cost_sums;             ///< per op: flops, hbm_bytes, comm_bytes
  std::vector<char> m_uniform;                 ///< per op: its rows' costs all alike
  std::vector<std::map<Key, int64_t>> m_local;
  std::vector<const TimelineRecord*> m_comm_rows;
  std::vector<double> m_costs;
  std::vector<std::vector<int64_t>> m_sets;
  std::vector<int64_t> m_totals;
  std::vector<int64_t> m_order;
};

} // namespace

RunSummary summarize_run(MPI_Comm comm, const OpTable& ops,
                         const std::vector<TimelineRecord>& mine) {
  return TimelineSummary(comm, ops, mine).run();
}

std::vector<DecodeBin> decode_bins(const RunSummary& summary) {
  constexpr int64_t kMaxBins = 8;
  const std::vector<int64_t>& ctx = summary.step_context;
  std::vector<DecodeBin> bins;
  if (ctx.empty() || ctx.size() != summary.step_ns.size()) return bins;
  const int64_t lo = *std::min_element(ctx.begin(), ctx.end());
  const int64_t hi = *std::max_element(ctx.begin(), ctx.end());
  const int64_t count = std::min<int64_t>(kMaxBins, hi - lo + 1);
  const int64_t width = (hi - lo + count) / count; // ceil((hi - lo + 1) / count)
  for (int64_t b = 0; b * width <= hi - lo; ++b) {
    DecodeBin bin;
    bin.context_first = INT64_MAX;
    bin.context_last = INT64_MIN;
    std::vector<double> times;
    for (size_t i = 0; i < ctx.size(); ++i)
      if ((ctx[i] - lo) / width == b) {
        times.push_back(summary.step_ns[i]);
        bin.context_first = std::min(bin.context_first, ctx[i]);
        bin.context_last = std::max(bin.context_last, ctx[i]);
      }
    if (times.empty()) continue;
    bin.tokens = static_cast<int64_t>(times.size());
    bin.mean_ns = mean(times);
    bin.p50_ns = percentile(times, 50);
    bin.p95_ns = percentile(times, 95);
    bin.p99_ns = percentile(times, 99);
    bins.push_back(bin);
  }
  return bins;
}

Table decode_bins_table(const std::vector<DecodeBin>& bins) {
  std::vector<int64_t> first, last, tokens;
  std::vector<double> p50, p95, p99, mean_ns;
  for (const DecodeBin& b : bins) {
    first.push_back(b.context_first);
    last.push_back(b.context_last);
    tokens.push_back(b.tokens);
    p50.push_back(b.p50_ns);
    p95.push_back(b.p95_ns);
    p99.push_back(b.p99_ns);
    mean_ns.push_back(b.mean_ns);
  }
  return {{"context_first", first}, {"context_last", last}, {"tokens", tokens},  {"p50_ns", p50},
          {"p95_ns", p95},          {"p99_ns", p99},        {"mean_ns", mean_ns}};
}

} // namespace ridgeline
