// Serving traces (read, checked, written, generated) and the continuous-batching scheduler.
#include "models/serving.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/stats.hpp"

namespace ridgeline {

namespace {

const char* const kColumns[] = {"arrival_s", "prompt_tokens", "output_tokens"};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The shortest text that reads back to the same double.
std::string shortest(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// One field of a trace: `text` as the column `column` takes it, or a problem (a reason).
struct Field {
  double arrival_s = 0;
  int64_t tokens = 0;
  std::string problem;
};

Field parse_field(const std::string& column, const std::string& raw) {
  const std::string text = trim(raw);
  Field f;
  const char* end = text.data() + text.size();
  if (column == kColumns[0]) {
    const auto r = std::from_chars(text.data(), end, f.arrival_s);
    if (text.empty() || r.ec != std::errc() || r.ptr != end || !std::isfinite(f.arrival_s))
      f.problem = column + " '" + text + "' is not a number";
    else if (f.arrival_s < 0)
      f.problem = column + " " + text + " is negative";
    return f;
  }
  const auto r = std::from_chars(text.data(), end, f.tokens);
  if (text.empty() || r.ec != std::errc() || r.ptr != end)
    f.problem = column + " '" + text + "' is not a whole number";
  else if (f.tokens < 1)
    f.problem = column + " " + text + " is not at least 1";
  return f;
}

// The problem of `r` after `previous` (nullptr for the first request), or "".
std::string request_problem(const Request& r, const Request* previous, int64_t kv_capacity) {
  if (r.prompt_tokens < 1 || r.output_tokens < 1)
    return "prompt_tokens and output_tokens must be at least 1";
  if (!std::isfinite(r.arrival_s) || r.arrival_s < 0)
    return "arrival_s " + shortest(r.arrival_s) + " is not a time >= 0";
  if (previous != nullptr && r.arrival_s < previous->arrival_s)
    return "arrival_s " + shortest(r.arrival_s) + " is before the previous request's " +
           shortest(previous->arrival_s) + " (arrival times must be sorted)";
  if (r.prompt_tokens > kv_capacity - r.output_tokens)
    return "prompt_tokens " + std::to_string(r.prompt_tokens) + " + output_tokens " +
           std::to_string(r.output_tokens) + " exceed the KV cache capacity of " +
           std::to_string(kv_capacity) + " tokens";
  return "";
}

// Splits a CSV line at its commas.
std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(line);
  while (std::getline(in, part, sep))
    parts.push_back(part);
  if (!line.empty() && line.back() == sep) parts.emplace_back();
  return parts;
}

// A CSV row's three fields in header order, or the problem.
std::string csv_row(const std::string& line, Request& r) {
  const std::vector<std::string> parts = split(line, ',');
  if (parts.size() != std::size(kColumns))
    return std::to_string(parts.size()) + " field(s), expected 3 (" +
           "arrival_s,prompt_tokens,output_tokens)";
  Field f[3];
  for (int c = 0; c < 3; ++c) {
    f[c] = parse_field(kColumns[c], parts[c]);
    if (!f[c].problem.empty()) return f[c].problem;
  }
  r.arrival_s = f[0].arrival_s, r.prompt_tokens = f[1].tokens, r.output_tokens = f[2].tokens;
  return "";
}

// A JSONL line: one flat object of exactly the three keys, each a number; or the problem.
std::string jsonl_row(const std::string& line, Request& r) {
  size_t i = 0;
  auto skip = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
      ++i;
  };
  skip();
  if (i >= line.size() || line[i++] != '{') return "not a JSON object ({...})";
  std::map<std::string, Field> seen;
  for (;;) {
    skip();
    if (i >= line.size() || line[i] != '"') return "expected a quoted key";
    const size_t close = line.find('"', i + 1);
    if (close == std::string::npos) return "unterminated key";
    const std::string key = line.substr(i + 1, close - i - 1);
    i = close + 1;
    if (std::find(std::begin(kColumns), std::end(kColumns), key) == std::end(kColumns))
      return "unknown key '" + key + "' (expected arrival_s, prompt_tokens, output_tokens)";
    if (seen.count(key)) return "key '" + key + "' given twice";
    skip();
    if (i >= line.size() || line[i++] != ':') return "expected ':' after '" + key + "'";
    const size_t end = line.find_first_of(",}", i);
    if (end == std::string::npos) return "unterminated object";
    seen[key] = parse_field(key, line.substr(i, end - i));
    if (!seen[key].problem.empty()) return seen[key].problem;
    i = end + 1;
    if (line[end] == '}') break;
  }
  skip();
  if (i != line.size()) return "text after the object";
  for (const char* c : kColumns)
    if (!seen.count(c)) return std::string("missing key '") + c + "'";
  r.arrival_s = seen[kColumns[0]].arrival_s;
  r.prompt_tokens = seen[kColumns[1]].tokens;
  r.output_tokens = seen[kColumns[2]].tokens;
  return "";
}

[[noreturn]] void refuse(const std::string& where, const std::string& problem) {
  throw UsageError(where + ": " + problem);
}

// The whole trace's problem: more output tokens than the schedule may hold, or "".
std::string total_problem(const std::vector<Request>& requests) {
  int64_t total = 0;
  for (const Request& r : requests)
    total += r.output_tokens;
  if (total <= kMaxTraceOutputTokens) return "";
  return "its output tokens total " + std::to_string(total) + ", more than " +
         std::to_string(kMaxTraceOutputTokens);
}

} // namespace

TraceFormat trace_format_of(const std::string& path) {
  const std::string ext = ".jsonl";
  const bool jsonl =
      path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  return jsonl ? TraceFormat::jsonl : TraceFormat::csv;
}

std::vector<Request> read_trace(const std::string& path, int64_t kv_capacity_tokens) {
  if (const std::string what = not_regular(path); !what.empty())
    refuse(path, "is " + what + ", not a trace file");
  std::ifstream in(path);
  if (!in) refuse(path, "cannot be read");
  const TraceFormat format = trace_format_of(path);
  std::vector<Request> requests;
  bool header = format == TraceFormat::jsonl;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::string text = trim(line);
    const std::string where = path + ":" + std::to_string(number);
    if (text.empty() || (format == TraceFormat::csv && text[0] == '#')) continue;
    if (!header) {
      if (text != "arrival_s,prompt_tokens,output_tokens")
        refuse(where,
               "expected the header 'arrival_s,prompt_tokens,output_tokens', got '" + text + "'");
      header = true;
      continue;
    }
    Request r;
    r.id = static_cast<int64_t>(requests.size());
    std::string problem = format == TraceFormat::csv ? csv_row(text, r) : jsonl_row(text, r);
    if (problem.empty())
      problem =
          request_problem(r, requests.empty() ? nullptr : &requests.back(), kv_capacity_tokens);
    if (!problem.empty()) refuse(where, problem);
    if (static_cast<int64_t>(requests.size()) == kMaxTraceRequests)
      refuse(where, "more than " + std::to_string(kMaxTraceRequests) + " requests");
    requests.push_back(r);
  }
  if (requests.empty()) refuse(path, "holds no request");
  if (const std::string problem = total_problem(requests); !problem.empty()) refuse(path, problem);
  return requests;
}

void check_trace(const std::vector<Request>& requests, int64_t kv_capacity_tokens,
                 const std::string& source) {
  if (requests.empty()) refuse(source, "no request");
  for (size_t k = 0; k < requests.size(); ++k) {
    const std::string problem =
        request_problem(requests[k], k ? &requests[k - 1] : nullptr, kv_capacity_tokens);
    if (!problem.empty())
      refuse(source, "request " + std::to_string(requests[k].id) + ": " + problem);
  }
  if (const std::string problem = total_problem(requests); !problem.empty())
    refuse(source, problem);
}

void write_trace(const std::string& path, const std::vector<Request>& requests,
                 TraceFormat format) {
  write_text_file(path, [&](std::ostream& out) {
    if (format == TraceFormat::csv) out << "arrival_s,prompt_tokens,output_tokens\n";
    for (const Request& r : requests) {
      if (format == TraceFormat::csv)
        out << shortest(r.arrival_s) << ',' << r.prompt_tokens << ',' << r.output_tokens << '\n';
      else
        out << "{\"arrival_s\": " << shortest(r.arrival_s)
            << ", \"prompt_tokens\": " << r.prompt_tokens
            << ", \"output_tokens\": " << r.output_tokens << "}\n";
    }
  });
}

} // namespace ridgeline

namespace ridgeline {

namespace {

int64_t parse_length(const std::string& text, const std::string& what) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (text.empty() || r.ec != std::errc() || r.ptr != end || v < 1)
    throw UsageError(what + ": '" + text + "' is not a whole number of tokens >= 1");
  return v;
}

// A draw of `d` from one raw 64-bit output.
int64_t draw_length(const LengthDistribution& d, uint64_t x) {
  if (d.values.size() == 1) return d.values[0];
  if (!d.values.empty()) return d.values[x % d.values.size()];
  const uint64_t span = static_cast<uint64_t>(d.hi - d.lo) + 1;
  return d.lo + static_cast<int64_t>(x % span);
}

} // namespace

LengthDistribution parse_length_distribution(const std::string& text, const std::string& what) {
  LengthDistribution d;
  if (const size_t colon = text.find(':'); colon != std::string::npos) {
    d.lo = parse_length(text.substr(0, colon), what);
    d.hi = parse_length(text.substr(colon + 1), what);
    if (d.hi < d.lo) throw UsageError(what + ": '" + text + "' is an empty range (A:B, A <= B)");
    return d;
  }
  for (const std::string& v : split(text, '/'))
    d.values.push_back(parse_length(v, what));
  if (d.values.empty()) throw UsageError(what + ": no length given");
  return d;
}

TraceGenerator parse_trace_generator(const std::string& text) {
  const std::string what = "--trace-gen";
  TraceGenerator g;
  std::map<std::string, std::string> kv;
  for (const std::string& part : split(text, ',')) {
    const size_t eq = part.find('=');
    const std::string key = trim(part.substr(0, eq));
    if (eq == std::string::npos)
      throw UsageError(what + ": '" + part +
                       "' is not key=value (keys: rate, requests, prompt, "
                       "output, seed)");
    if (kv.count(key)) throw UsageError(what + ": " + key + " given twice");
    kv[key] = trim(part.substr(eq + 1));
  }
  for (const char* key : {"rate", "requests", "prompt", "output", "seed"})
    if (!kv.count(key)) throw UsageError(what + ": missing " + key + "=");
  if (kv.size() != 5)
    throw UsageError(what + ": unknown key (keys: rate, requests, prompt, output, seed)");
  const std::string& rate = kv["rate"];
  const auto r = std::from_chars(rate.data(), rate.data() + rate.size(), g.rate_per_s);
  // At least 0.001/s: a million gaps of at most 37 / rate s each stay far inside int64 us.
  if (r.ec != std::errc() || r.ptr != rate.data() + rate.size() || !(g.rate_per_s >= 1e-3) ||
      !(g.rate_per_s <= 1e9))
    throw UsageError(what + ": rate '" + rate + "' is not a rate in [0.001, 1e9] (requests/s)");
  g.requests = parse_length(kv["requests"], what + " requests");
  if (g.requests > kMaxTraceRequests)
    throw UsageError(what + ": requests=" + std::to_string(g.requests) + " is more than " +
                     std::to_string(kMaxTraceRequests));
  g.prompt = parse_length_distribution(kv["prompt"], what + " prompt");
  g.output = parse_length_distribution(kv["output"], what + " output");
  const std::string& seed = kv["seed"];
  const auto s = std::from_chars(seed.data(), seed.data() + seed.size(), g.seed);
  if (seed.empty() || s.ec != std::errc() || s.ptr != seed.data() + seed.size())
    throw UsageError(what + ": seed '" + seed + "' is not a whole number >= 0");
  return g;
}

std::vector<int64_t> ragged_contexts(const std::string& dist, int64_t count, uint64_t seed) {
  const std::string what = "--context-dist";
  const std::string kind = "uniform:";
  if (dist.compare(0, kind.size(), kind) != 0)
    throw UsageError(what + ": unknown distribution '" + dist + "' (uniform:LO:HI)");
  const LengthDistribution d = parse_length_distribution(dist.substr(kind.size()), what);
  if (!d.values.empty())
    throw UsageError(what + ": '" + dist + "' is not uniform:LO:HI with LO <= HI");
  std::mt19937_64 rng(seed);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(draw_length(d, rng()));
  return out;
}

std::vector<Request> generate_trace(const TraceGenerator& g) {
  std::mt19937_64 rng(g.seed);
  std::vector<Request> requests;
  int64_t arrival_us = 0;
  for (int64_t k = 0; k < g.requests; ++k) {
    const uint64_t gap = rng(), prompt = rng(), output = rng();
    const double u = static_cast<double>(gap >> 11) * 0x1.0p-53;
    if (k > 0) arrival_us += std::llround(-std::log1p(-u) / g.rate_per_s * 1e6);
    Request r;
    r.id = k;
    r.arrival_s = static_cast<double>(arrival_us) / 1e6;
    r.prompt_tokens = draw_length(g.prompt, prompt);
    r.output_tokens = draw_length(g.output, output);
    requests.push_back(r);
  }
  return requests;
}

} // namespace ridgeline

namespace ridgeline {

std::string check_scheduler_config(const SchedulerConfig& c) {
  if (c.token_budget < 1) return "the token budget must be at least 1";
  if (c.chunk < 1) return "the prefill chunk must be at least 1 token";
  if (c.max_batch < 1) return "the maximum batch must be at least 1 sequence";
  if (c.kv_capacity_tokens < 2) return "the KV cache capacity must be at least 2 tokens";
  return "";
}

StepKind step_kind(const StepMix& mix) {
  return mix.prefill_tokens == 0  ? StepKind::decode_only
         : mix.decode_tokens == 0 ? StepKind::prefill_only
                                  : StepKind::mixed;
}

const char* step_kind_name(StepKind k) {
  switch (k) {
  case StepKind::decode_only:
    return "decode only";
  case StepKind::prefill_only:
    return "prefill only";
  case StepKind::mixed:
    return "mixed";
  }
  return "?";
}

const char* entry_kind_name(EntryKind k) {
  return k == EntryKind::prefill ? "prefill" : "decode";
}

double RequestTimes::tpot_s() const {
  return has_tpot() ? (finish_s - first_token_s) / static_cast<double>(output_tokens - 1) : 0.0;
}

namespace {

// The scheduler's state of one request.
struct Sequence {
  int64_t prefilled = 0; ///< prompt tokens in the KV cache
  int64_t produced = 0;  ///< output tokens produced
};

void add_entry(StepMix& mix, int64_t request, EntryKind kind, int64_t tokens, int64_t context) {
  mix.entries.push_back({request, kind, tokens, context});
  if (kind == EntryKind::prefill) {
    mix.prefill_tokens += tokens;
    ++mix.prefill_sequences;
  } else {
    mix.decode_tokens += tokens;
    ++mix.decode_sequences;
  }
}

} // namespace

ServingSchedule schedule_requests(const std::vector<Request>& requests,
                                  const SchedulerConfig& config, const StepCost& cost) {
  const size_t n = requests.size();
  ServingSchedule out;
  for (const Request& r : requests)
    out.requests.push_back({r.id, r.output_tokens, r.arrival_s, 0, 0});
  std::vector<Sequence> seq(n);
  std::deque<size_t> queue;    // arrived, not started: first come, first served
  std::vector<size_t> running; // started, in start order (which is arrival order)
  int64_t reserved = 0;        // KV tokens the running sequences hold
  size_t next = 0, finished = 0;
  double now_s = n ? requests[0].arrival_s : 0.0;
  while (finished < n) {
    while (next < n && requests[next].arrival_s <= now_s)
      queue.push_back(next++);
    StepMix mix;
    int64_t budget = config.token_budget;
    auto room = [&] {
      return budget > 0 && static_cast<int64_t>(mix.entries.size()) < config.max_batch;
    };
    auto chunk = [&](size_t k) {
      const int64_t c =
          std::min({requests[k].prompt_tokens - seq[k].prefilled, config.chunk, budget});
      add_entry(mix, static_cast<int64_t>(k), EntryKind::prefill, c, seq[k].prefilled);
      budget -= c;
    };
    for (size_t k : running)
      if (seq[k].produced > 0 && room()) {
        add_entry(mix, static_cast<int64_t>(k), EntryKind::decode, 1,
                  requests[k].prompt_tokens + seq[k].produced - 1);
        budget -= 1;
      }
    for (size_t k : running)
      if (seq[k].produced == 0 && room()) chunk(k);
    while (!queue.empty() && room()) {
      const size_t k = queue.front();
      const int64_t need = requests[k].prompt_tokens + requests[k].output_tokens;
      if (reserved + need > config.kv_capacity_tokens) break;
      reserved += need;
      running.push_back(k);
      queue.pop_front();
      chunk(k);
    }
    if (mix.entries.empty()) {
      // Nothing runs only with nothing started: a request always fits an empty cache.
      RIDGELINE_REQUIRE(next < n, "the scheduler has requests left and none it can run");
      now_s = requests[next].arrival_s;
      continue;
    }
    const double duration_ns = cost(mix);
    RIDGELINE_REQUIRE(duration_ns > 0 && std::isfinite(duration_ns),
                      "a step's cost must be a time > 0 ns");
    const double end_s = now_s + duration_ns / 1e9;
    for (const StepEntry& e : mix.entries) {
      const size_t k = static_cast<size_t>(e.request);
      Sequence& s = seq[k];
      RequestTimes& t = out.requests[k];
      if (e.kind == EntryKind::prefill) {
        s.prefilled += e.tokens;
        if (s.prefilled < requests[k].prompt_tokens) continue;
        t.first_token_s = end_s;
      }
      if (++s.produced < requests[k].output_tokens) continue;
      t.finish_s = end_s;
      reserved -= requests[k].prompt_tokens + requests[k].output_tokens;
      ++finished;
    }
    running.erase(
        std::remove_if(running.begin(), running.end(),
                       [&](size_t k) { return seq[k].produced == requests[k].output_tokens; }),
        running.end());
    out.steps.push_back({now_s, end_s, std::move(mix)});
    now_s = end_s;
  }
  return out;
}

Percentiles percentiles(const std::vector<double>& values) {
  return {percentile(values, 50), percentile(values, 95), percentile(values, 99),
          static_cast<int64_t>(values.size())};
}

ServingMetrics serving_metrics(const ServingSchedule& s, double slo_ttft_s, double slo_tpot_s) {
  ServingMetrics m;
  std::vector<double> ttft, tpot, e2e;
  double first_s = std::numeric_limits<double>::infinity(), last_s = 0;
  for (const RequestTimes& r : s.requests) {
    ttft.push_back(r.ttft_s());
    e2e.push_back(r.e2e_s());
    if (r.has_tpot()) tpot.push_back(r.tpot_s());
    const bool ttft_ok = slo_ttft_s <= 0 || r.ttft_s() <= slo_ttft_s;
    const bool tpot_ok = slo_tpot_s <= 0 || !r.has_tpot() || r.tpot_s() <= slo_tpot_s;
    m.good += ttft_ok && tpot_ok ? 1 : 0;
    first_s = std::min(first_s, r.arrival_s);
    last_s = std::max(last_s, r.finish_s);
  }
  m.requests = static_cast<int64_t>(s.requests.size());
  m.ttft_s = percentiles(ttft);
  m.tpot_s = percentiles(tpot);
  m.e2e_s = percentiles(e2e);
  m.span_s = m.requests ? last_s - first_s : 0;
  if (m.span_s > 0) {
    m.goodput_per_s = static_cast<double>(m.good) / m.span_s;
    m.throughput_per_s = static_cast<double>(m.requests) / m.span_s;
  }
  return m;
}

} // namespace ridgeline

namespace ridgeline {

std::vector<OpSpec> mixed_step_ops(const ModelSpec& m, const StepMix& mix, int tp, DType dtype,
                                   AttentionImpl attn, bool sequence_parallel) {
  LayerShape base;
  base.tp = tp;
  base.dtype = dtype;
  base.sequence_parallel = sequence_parallel;
  auto prefill = [&](int64_t seq) {
    LayerShape s = base;
    s.seq = seq;
    return s;
  };
  auto decode = [&](int64_t batch, int64_t context) {
    LayerShape s = base;
    s.phase = Phase::decode;
    s.batch = batch;
    s.context = context;
    return s;
  };
  auto attention_of = [&](const LayerShape& s) {
    return find_op(layer_ops(m, s, attn), op::attention).cost;
  };
  // What one more cached token adds to a token's attention: its key and value read, and its
  // dot products (the work model's decode attention is linear in the context).
  const OpCost d0 = attention_of(decode(1, 0)), d1 = attention_of(decode(1, 1));
  const OpCost per_key{d1.flops - d0.flops, d1.hbm_bytes - d0.hbm_bytes, 0};
  OpCost pre;
  int64_t decode_context = 0;
  for (const StepEntry& e : mix.entries) {
    if (e.kind == EntryKind::decode) {
      decode_context += e.context;
      continue;
    }
    pre.flops +=
        attention_flops(m, prefill(e.context + e.tokens)) - attention_flops(m, prefill(e.context));
    pre.hbm_bytes += attention_of(prefill(e.tokens)).hbm_bytes +
                     static_cast<double>(e.context) * per_key.hbm_bytes;
  }
  std::vector<OpSpec> decode_ops;
  if (mix.decode_sequences > 0) decode_ops = layer_ops(m, decode(mix.decode_sequences, 0), attn);
  std::vector<OpSpec> ops;
  for (const OpSpec& o : layer_ops(m, prefill(mix.tokens()), attn)) {
    if (o.name != op::attention) {
      ops.push_back(o);
      continue;
    }
    if (mix.decode_sequences > 0) ops.push_back(find_op(decode_ops, op::kv_append));
    if (mix.prefill_sequences > 0) ops.push_back(registered_op(op::attention_prefill, pre));
    if (mix.decode_sequences > 0) {
      OpSpec dec = registered_op(op::attention_decode, find_op(decode_ops, op::attention).cost);
      dec.cost.flops += static_cast<double>(decode_context) * per_key.flops;
      dec.cost.hbm_bytes += static_cast<double>(decode_context) * per_key.hbm_bytes;
      ops.push_back(dec);
    }
  }
  return ops;
}

} // namespace ridgeline

namespace ridgeline {

StepMix mixed_step_mix(const std::vector<int64_t>& decode_contexts,
                       const std::vector<int64_t>& chunks, int64_t chunk_context) {
  StepMix mix;
  int64_t request = 0;
  for (int64_t context : decode_contexts) {
    mix.entries.push_back({request++, EntryKind::decode, 1, context});
    ++mix.decode_tokens;
    ++mix.decode_sequences;
  }
  for (int64_t chunk : chunks) {
    mix.entries.push_back({request++, EntryKind::prefill, chunk, chunk_context});
    mix.prefill_tokens += chunk;
    ++mix.prefill_sequences;
  }
  return mix;
}

StepMix serving_capacity_mix(const SchedulerConfig& config, int64_t longest) {
  const int64_t n = std::max<int64_t>(1, std::min(config.max_batch, config.token_budget));
  return mixed_step_mix(std::vector<int64_t>(static_cast<size_t>(n - 1), longest - 1),
                        {config.token_budget - (n - 1)}, 0);
}

MixSummary mix_summary(const StepMix& mix) {
  MixSummary s;
  s.prefill_tokens = mix.prefill_tokens;
  s.decode_tokens = mix.decode_tokens;
  s.prefill_sequences = mix.prefill_sequences;
  s.decode_sequences = mix.decode_sequences;
  double sum = 0;
  bool first = true;
  for (const StepEntry& e : mix.entries) {
    if (e.kind != EntryKind::decode) continue;
    s.context_min = first ? e.context : std::min(s.context_min, e.context);
    s.context_max = first ? e.context : std::max(s.context_max, e.context);
    first = false;
    sum += static_cast<double>(e.context);
  }
  if (mix.decode_sequences > 0) s.context_mean = sum / static_cast<double>(mix.decode_sequences);
  return s;
}

int64_t mix_cache_rows(const StepMix& mix) {
  int64_t rows = 0;
  for (const StepEntry& e : mix.entries)
    rows = std::max(rows, e.context + e.tokens);
  return rows;
}

} // namespace ridgeline
