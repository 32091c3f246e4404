// Serving traces and a continuous-batching scheduler simulated over them: requests read from a
// trace file or generated, batched step by step (decode first, chunked prefill, a token budget),
// each step's mix costed by a caller's function, and the requests' latencies summarised. Pure:
// no MPI, and no files but the trace reader and writer; `ridgeline model --trace` drives it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "models/backend.hpp"
#include "models/model_spec.hpp"
#include "models/work_model.hpp"

namespace ridgeline {

/// One request of a trace.
struct Request {
  int64_t id = 0;            ///< its row in the trace, from 0
  double arrival_s = 0;      ///< arrival time (s), not before the previous request's
  int64_t prompt_tokens = 0; ///< tokens prefilled
  int64_t output_tokens = 0; ///< tokens generated, the first one by the step finishing the prompt
};

/// The most requests a trace may hold: the schedule keeps every step's entries (a decode entry
/// per output token), which a larger trace would take gigabytes to hold.
inline constexpr int64_t kMaxTraceRequests = 100000;
/// The most output tokens a trace may hold in all (each one a decode entry of some step).
inline constexpr int64_t kMaxTraceOutputTokens = 20000000;

/// Trace file formats: CSV (header `arrival_s,prompt_tokens,output_tokens`, lines starting with
/// `#` and blank lines skipped) or JSONL (one flat object a line with exactly those three keys,
/// blank lines skipped). The format is the file name's: `.jsonl` is JSONL, anything else CSV.
enum class TraceFormat { csv, jsonl };
TraceFormat trace_format_of(const std::string& path);

/// Reads and checks a trace: the first problem (a missing or unknown column or key, a
/// non-numeric field, a negative or non-integer length, an arrival time before the previous
/// one, a prompt + output longer than `kv_capacity_tokens`, more than kMaxTraceRequests requests or
/// kMaxTraceOutputTokens output tokens) is thrown as one UsageError naming the file and line.
/// Requests get ids 0, 1, ... in file order.
std::vector<Request> read_trace(const std::string& path, int64_t kv_capacity_tokens);

/// The checks read_trace applies, on requests from elsewhere (a generated trace): the first
/// problem thrown as UsageError, prefixed by `source` and naming the request's id.
void check_trace(const std::vector<Request>& requests, int64_t kv_capacity_tokens,
                 const std::string& source);

/// Writes `requests` in `format`; every arrival time in the shortest text that reads back to the
/// same double, so read_trace(write_trace(x)) == x. Throws Error where the file cannot be written.
void write_trace(const std::string& path, const std::vector<Request>& requests, TraceFormat format);

/// How a generated trace draws a length: a fixed value, uniform integers in [lo, hi], or one of
/// a list, each equally likely.
struct LengthDistribution {
  std::vector<int64_t> values; ///< fixed: one value; list: its values
  int64_t lo = 0, hi = 0;      ///< uniform when values is empty
};

/// Parses `N` (fixed), `A:B` (uniform in [A, B]) or `A/B/C` (a list); every value at least 1.
/// Throws UsageError naming `what`.
LengthDistribution parse_length_distribution(const std::string& text, const std::string& what);

/// A generated trace: Poisson arrivals at `rate_per_s`, the first at 0.
struct TraceGenerator {
  double rate_per_s = 1;
  int64_t requests = 1;
  LengthDistribution prompt, output;
  uint64_t seed = 0;
};

/// Parses `rate=R,requests=N,prompt=D,output=D,seed=S` (any order, every key once; R in
/// [0.001, 1e9] requests/s, N at most kMaxTraceRequests, D as in parse_length_distribution).
/// Throws UsageError naming the key at fault.
TraceGenerator parse_trace_generator(const std::string& text);

/// The generated requests, the same bits on every platform: one std::mt19937_64 seeded with
/// `seed`, three raw draws per request (inter-arrival gap, prompt, output, in that order, drawn
/// whatever the distribution). The gap is -log1p(-u) / rate with u = the draw's top 53 bits /
/// 2^53 (the first request's gap is drawn and unused: it arrives at 0), rounded to the microsecond,
/// and arrivals are sums of whole microseconds (so that no last-bit difference of a libm's log can
/// show); a uniform length is lo + draw mod (hi - lo + 1), a list's value the one at draw mod its
/// size.
std::vector<Request> generate_trace(const TraceGenerator& g);

/// The continuous-batching scheduler's limits.
struct SchedulerConfig {
  int64_t token_budget = 2048;         ///< tokens per step, decode and prefill together
  int64_t chunk = 512;                 ///< prefill tokens of one sequence per step at most
  int64_t max_batch = 64;              ///< sequences per step at most
  int64_t kv_capacity_tokens = 262144; ///< KV cache tokens of every running sequence together
};

/// Returns "" or the first problem of `c` (each limit at least 1).
std::string check_scheduler_config(const SchedulerConfig& c);

enum class EntryKind { prefill, decode };
const char* entry_kind_name(EntryKind k);

/// One sequence's share of a step.
struct StepEntry {
  int64_t request = 0;
  EntryKind kind = EntryKind::decode;
  int64_t tokens = 0;  ///< prefill: the chunk's tokens; decode: 1
  int64_t context = 0; ///< tokens of the sequence in the KV cache before the step
};

/// What one step runs: its entries, decode ones first, then prefill chunks in arrival order.
struct StepMix {
  std::vector<StepEntry> entries;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  int64_t prefill_sequences = 0, decode_sequences = 0;

  int64_t tokens() const { return prefill_tokens + decode_tokens; }
};

/// What a step holds: decode tokens only, prefill chunks only, or both.
enum class StepKind { decode_only, prefill_only, mixed };
inline constexpr int kStepKinds = 3;
StepKind step_kind(const StepMix& mix);
/// "decode only", "prefill only", "mixed".
const char* step_kind_name(StepKind k);

/// The duration of a step of that mix (ns, > 0).
using StepCost = std::function<double(const StepMix&)>;

/// One step simulated.
struct ScheduledStep {
  double start_s = 0, end_s = 0;
  StepMix mix;
};

/// One request's times (s): arrival, its first output token (the end of the step finishing its
/// prompt) and its last (the end of the step producing it).
struct RequestTimes {
  int64_t id = 0;
  int64_t output_tokens = 0;
  double arrival_s = 0, first_token_s = 0, finish_s = 0;

  double ttft_s() const { return first_token_s - arrival_s; }
  double e2e_s() const { return finish_s - arrival_s; }
  /// (finish - first token) / (output - 1); a request of one output token has none (has_tpot).
  double tpot_s() const;
  bool has_tpot() const { return output_tokens > 1; }
};

struct ServingSchedule {
  std::vector<ScheduledStep> steps;
  std::vector<RequestTimes> requests; ///< in the trace's order
};

/// Simulates continuous batching over `requests` (sorted by arrival, as check_trace holds).
/// The clock starts at the first arrival; a request is admitted to the queue once its arrival
/// <= the clock, and a step's arrivals wait for the next step. Each step:
///  1. decode first: one token for every running sequence whose prompt is done, in admission
///     order, while the step has fewer than max_batch sequences and budget left;
///  2. prefill: chunks of min(the prompt left, chunk, the budget left) for the sequences whose
///     prompt is unfinished, in arrival order: first the running ones, then queued ones, each
///     of which starts running only where its whole prompt + output fits in the KV capacity
///     the running sequences leave (reserved at start, released at its end; no preemption).
///     The queue is first come, first served: a request that does not fit holds back the ones
///     behind it.
/// A step with nothing to run moves the clock to the next arrival instead. A step lasts
/// `cost(mix)` ns; its end is every token's time: the first output token of a sequence whose
/// prompt it finishes, and the next token of each decode entry. A decode entry's context is
/// prompt + tokens produced - 1 (the last token's key is written by the step reading it).
ServingSchedule schedule_requests(const std::vector<Request>& requests,
                                  const SchedulerConfig& config, const StepCost& cost);

/// p50, p95 and p99 of a set of values, by core/stats.hpp's percentile(): linear
/// interpolation between the closest ranks, numpy's default (method="linear"): of n sorted
/// values x, r = p / 100 x (n - 1), x[floor r] + (r - floor r) (x[floor r + 1] - x[floor r]).
/// All 0 for no values (count 0).
struct Percentiles {
  double p50 = 0, p95 = 0, p99 = 0;
  int64_t count = 0; ///< values summarised
};
Percentiles percentiles(const std::vector<double>& values);

/// A schedule's latencies and goodput (times in s).
struct ServingMetrics {
  Percentiles ttft_s, tpot_s, e2e_s; ///< tpot over the requests of more than one output token
  int64_t requests = 0;
  int64_t good = 0;            ///< requests meeting both targets (one output token: TTFT alone)
  double span_s = 0;           ///< first arrival to last finish
  double goodput_per_s = 0;    ///< good / span_s
  double throughput_per_s = 0; ///< requests / span_s
};

/// The metrics of `s`: a request is good when TTFT <= slo_ttft_s and TPOT <= slo_tpot_s (a
/// target <= 0 is no target).
ServingMetrics serving_metrics(const ServingSchedule& s, double slo_ttft_s, double slo_tpot_s);

/// A mixed step's decode contexts drawn from `dist` (`uniform:LO:HI`: whole numbers in
/// [LO, HI], LO >= 1), the same on every platform: one std::mt19937_64 seeded with `seed`, one
/// raw draw a context, LO + draw mod (HI - LO + 1), as generate_trace() draws a length. Throws
/// UsageError naming --context-dist for an unknown distribution or a bad bound.
std::vector<int64_t> ragged_contexts(const std::string& dist, int64_t count, uint64_t seed);

/// One mixed step as `ridgeline run --phase mixed` runs it: a decode entry (one token) at each
/// of `decode_contexts`, then a prefill entry of each of `chunks` tokens (a sequence each), each
/// after `chunk_context` tokens of its sequence already cached (StepMix's order: decode first).
StepMix mixed_step_mix(const std::vector<int64_t>& decode_contexts,
                       const std::vector<int64_t>& chunks, int64_t chunk_context);

/// The largest step the scheduler gives a trace whose requests hold at most `longest` tokens
/// each (prompt + output): the mix a trace run's stage is built at, its capacity
/// (TpStage::set_mix). n = min(max_batch, token_budget) sequences: n - 1 decode tokens, each
/// after longest - 1 cached tokens, and one prefill chunk of the token_budget - (n - 1) tokens
/// left, from context 0. Every step of such a trace has at most its tokens and sequences, and
/// needs at most its KV cache rows per sequence (max(longest, the chunk)).
StepMix serving_capacity_mix(const SchedulerConfig& config, int64_t longest);

/// What a mixed step holds: its tokens and sequences of each kind, and the contexts (cached
/// tokens before the step) of its decode entries (all 0 without any).
struct MixSummary {
  int64_t prefill_tokens = 0, decode_tokens = 0;
  int64_t prefill_sequences = 0, decode_sequences = 0;
  int64_t context_min = 0, context_max = 0;
  double context_mean = 0;
};
MixSummary mix_summary(const StepMix& mix);

/// KV cache rows a sequence of `mix` needs: the largest context + tokens of its entries (each
/// sequence of the step gets a block of this many rows).
int64_t mix_cache_rows(const StepMix& mix);

/// One layer of a mixed step on one rank, from the work model: every op but attention over the
/// step's tokens (a prefill of one sequence of mix.tokens() tokens: GEMMs, norms, the TP
/// collectives); attention_prefill, the sum over the prefill chunks (c queries after p cached
/// tokens: a causal prefill of p + c less one of p in FLOPs; a prefill of c in bytes, plus
/// the p cached keys and values read); attention_decode, the sum over the decode tokens (each
/// a decode step at its context); and kv_append for the decode tokens. Kinds without entries
/// are left out.
std::vector<OpSpec> mixed_step_ops(const ModelSpec& m, const StepMix& mix, int tp, DType dtype,
                                   AttentionImpl attn, bool sequence_parallel);

} // namespace ridgeline
