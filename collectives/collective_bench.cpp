// The collective registry, size sweeps, exact expected values, the #wrong checker and the
// alpha/beta fits. Nothing here touches a device or MPI, so all of it is unit tested.
#include "collectives/collective_bench.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "collectives/half_types.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

double factor_all_reduce(int n) {
  return 2.0 * (n - 1) / n;
}
double factor_n_minus_1(int n) {
  return static_cast<double>(n - 1) / n;
}
double factor_one(int) {
  return 1.0;
}

// The one table of collectives (house style: busbw factors live here and nowhere else).
// In place: MPI takes MPI_IN_PLACE, whose reduce-scatter result lands in block 0 of the one
// buffer, while NCCL expects recv = send + rank * count. All-to-all and send/recv have no safe
// in-place form on NCCL (grouped point-to-point would overwrite blocks still to be sent), nor
// send/recv on MPI (a pending send and receive may not share memory).
const std::vector<CollectiveSpec> kCollectives = {
    {Collective::all_reduce, "all_reduce", factor_all_reduce, false, true, false,
     InPlace::same_buffer, InPlace::same_buffer},
    {Collective::all_gather, "all_gather", factor_n_minus_1, true, false, false,
     InPlace::send_in_recv_block, InPlace::send_in_recv_block},
    {Collective::reduce_scatter, "reduce_scatter", factor_n_minus_1, true, true, false,
     InPlace::recv_in_send_block, InPlace::same_buffer},
    {Collective::all_to_all, "all_to_all", factor_n_minus_1, true, false, false,
     InPlace::unsupported, InPlace::same_buffer},
    {Collective::broadcast, "broadcast", factor_one, false, false, true, InPlace::same_buffer,
     InPlace::same_buffer},
    {Collective::reduce, "reduce", factor_one, false, true, true, InPlace::same_buffer,
     InPlace::same_buffer},
    {Collective::sendrecv, "sendrecv", factor_one, false, false, false, InPlace::unsupported,
     InPlace::unsupported},
};

// Period of the reduction patterns below in the element index.
constexpr size_t kSumPeriod = 5;
// Period and rank stride of the copy pattern: 241 is prime, so ranks up to 241 apart differ.
constexpr size_t kCopyPeriod = 241;
constexpr size_t kCopyRankStride = 37;

// Largest integer magnitude up to which every integer is exact in `dtype`.
double exact_integer_limit(DType dtype) {
  switch (dtype) {
  case DType::bf16:
    return 256.0;
  case DType::f16:
    return 2048.0;
  case DType::f32:
    return 16777216.0;
  case DType::i32:
    return 2147483647.0;
  }
  return 0;
}

bool is_power_of_two(int n) {
  return n > 0 && (n & (n - 1)) == 0;
}

void encode(void* data, size_t i, DType dtype, double value) {
  switch (dtype) {
  case DType::f32:
    static_cast<float*>(data)[i] = static_cast<float>(value);
    break;
  case DType::i32:
    static_cast<int32_t*>(data)[i] = static_cast<int32_t>(value);
    break;
  case DType::bf16:
    static_cast<uint16_t*>(data)[i] = float_to_bf16(static_cast<float>(value));
    break;
  case DType::f16:
    static_cast<uint16_t*>(data)[i] = float_to_f16(static_cast<float>(value));
    break;
  }
}

// `value` as stored in `dtype` and read back (exact for every value this file generates).
double round_to(DType dtype, double value) {
  unsigned char bytes[4];
  encode(bytes, 0, dtype, value);
  return decode_element(bytes, 0, dtype);
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
  case ReduceOp::sum:
  case ReduceOp::avg:
    return a + b;
  case ReduceOp::prod:
    return a * b;
  case ReduceOp::max:
    return std::max(a, b);
  case ReduceOp::min:
    return std::min(a, b);
  }
  return a;
}

} // namespace

const std::vector<CollectiveSpec>& collective_registry() {
  return kCollectives;
}

const CollectiveSpec* find_collective(const std::string& name) {
  for (const CollectiveSpec& spec : kCollectives)
    if (name == spec.name) return &spec;
  return nullptr;
}

InPlace in_place_layout(const CollectiveSpec& spec, const std::string& backend) {
  return backend == "nccl" ? spec.in_place_nccl : spec.in_place_mpi;
}

CollectiveShape collective_shape(const CollectiveSpec& spec, size_t requested_bytes, DType dtype,
                                 int ranks) {
  const size_t elements = requested_bytes / dtype_size(dtype);
  const auto n = static_cast<size_t>(ranks);
  CollectiveShape shape;
  if (spec.per_rank_blocks) {
    shape.count = elements / n;
    const size_t total = shape.count * n;
    switch (spec.id) {
    case Collective::all_gather:
      shape.send_elements = shape.count;
      shape.recv_elements = total;
      break;
    case Collective::reduce_scatter:
      shape.send_elements = total;
      shape.recv_elements = shape.count;
      break;
    default:
      shape.send_elements = total;
      shape.recv_elements = total;
      break;
    }
  } else {
    shape.count = elements;
    shape.send_elements = elements;
    shape.recv_elements = elements;
  }
  shape.size_bytes = std::max(shape.send_elements, shape.recv_elements) * dtype_size(dtype);
  return shape;
}

double algbw_gbps(double size_bytes, double time_ns) {
  return size_bytes / time_ns;
}

double busbw_gbps(const CollectiveSpec& spec, int ranks, double size_bytes, double time_ns) {
  return algbw_gbps(size_bytes, time_ns) * spec.busbw_factor(ranks);
}

size_t parse_size_bytes(const std::string& text, const std::string& option) {
  const std::string what = option + " '" + text + "'";
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
    ++pos;
  if (pos == 0 || pos > 19)
    throw UsageError(what + ": expected a byte count such as 8, 64K, 4M or 1G");
  const unsigned long long number = std::stoull(text.substr(0, pos));
  std::string suffix = text.substr(pos);
  for (char& c : suffix)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!suffix.empty() && suffix.back() == 'B') suffix.pop_back();
  int shift = 0;
  if (suffix == "K")
    shift = 10;
  else if (suffix == "M")
    shift = 20;
  else if (suffix == "G")
    shift = 30;
  else if (suffix == "T")
    shift = 40;
  else if (!suffix.empty())
    throw UsageError(what + ": unknown suffix (expected K, M, G or T, powers of 1024)");
  if (number == 0) throw UsageError(what + ": must be > 0");
  if (number > (std::numeric_limits<size_t>::max() >> shift))
    throw UsageError(what + ": too large");
  return static_cast<size_t>(number) << shift;
}

std::vector<size_t> size_sweep(size_t min_bytes, size_t max_bytes, double step_factor) {
  if (min_bytes == 0 || max_bytes == 0) throw UsageError("sizes must be > 0 bytes");
  if (min_bytes > max_bytes)
    throw UsageError("--min-bytes " + std::to_string(min_bytes) + " is larger than --max-bytes " +
                     std::to_string(max_bytes));
  if (!(step_factor > 1.0))
    throw UsageError("--step-factor " + std::to_string(step_factor) + " must be > 1");
  std::vector<size_t> sizes;
  for (size_t size = min_bytes; size <= max_bytes;) {
    if (sizes.size() == kMaxSweepSizes)
      throw UsageError("--step-factor " + std::to_string(step_factor) + " from --min-bytes " +
                       std::to_string(min_bytes) + " to --max-bytes " + std::to_string(max_bytes) +
                       " plans more than " + std::to_string(kMaxSweepSizes) +
                       " sizes: raise --step-factor or narrow the range");
    sizes.push_back(size);
    const double next = std::floor(static_cast<double>(size) * step_factor);
    if (next > static_cast<double>(max_bytes)) break;
    size = std::max(size + 1, static_cast<size_t>(next));
  }
  return sizes;
}

// Reductions: sum, max and min use ((rank + index) % 5) - 2, in [-2, 2], so every partial sum
// over n ranks is an integer of magnitude <= 2n, exact while 2n fits the dtype's significand
// (bf16: n <= 128). prod uses 1 everywhere except one 2 and one -1 per element (on different
// ranks), so the product is +-2 for any n, never overflowing. avg adds +1/-1 rank offsets that
// cancel over the ranks to a rank-independent base in [-2, 2]: the sum is n * base, so the
// average is exact for integers (whatever the division's rounding) and, for floats, for
// power-of-two n where dividing (or NCCL's pre-multiplying by 1/n) is exact.
// Other collectives copy ((37 * rank + index) % 241) - 120, which differs between ranks.
double send_value(const CollectiveSpec& spec, ReduceOp op, int rank, int ranks, size_t index) {
  const auto r = static_cast<size_t>(rank);
  const auto n = static_cast<size_t>(ranks);
  if (!spec.reduces)
    return static_cast<double>((kCopyRankStride * r + index % kCopyPeriod) % kCopyPeriod) - 120.0;
  switch (op) {
  case ReduceOp::prod: {
    const size_t k = (r + index % n) % n;
    return k == 0 ? 2.0 : (k == 1 ? -1.0 : 1.0);
  }
  case ReduceOp::avg: {
    const double base = static_cast<double>(index % kSumPeriod) - 2.0;
    const bool paired = r < n - n % 2;
    return base + (paired ? (r % 2 == 0 ? 1.0 : -1.0) : 0.0);
  }
  default:
    return static_cast<double>((r + index % kSumPeriod) % kSumPeriod) - 2.0;
  }
}

std::string exactness_problem(DType dtype, ReduceOp op, int ranks) {
  const double limit = exact_integer_limit(dtype);
  const std::string where = std::string(reduce_op_name(op)) + " in " + dtype_name(dtype) +
                            " over " + std::to_string(ranks) + " ranks";
  if (op == ReduceOp::sum && 2.0 * ranks > limit)
    return where + ": partial sums up to " + std::to_string(2 * ranks) +
           " are not exact (at most " + std::to_string(static_cast<int64_t>(limit / 2)) + " ranks)";
  if (op == ReduceOp::avg) {
    if (3.0 * ranks > limit)
      return where + ": partial sums are not exact (at most " +
             std::to_string(static_cast<int64_t>(limit / 3)) + " ranks)";
    if (dtype != DType::i32 && !is_power_of_two(ranks))
      return where + ": dividing by a group size that is not a power of two is not exact in a "
                     "floating type (use --op sum, or a power-of-two --group-size)";
  }
  return "";
}

// Every send pattern repeats in the element index with this period (see send_value), which is
// what lets filling and checking GiB buffers run at memcpy/memcmp speed instead of per element.
static size_t pattern_period(const CollectiveSpec& spec, ReduceOp op, int ranks) {
  if (!spec.reduces) return kCopyPeriod;
  return op == ReduceOp::prod ? static_cast<size_t>(ranks) : kSumPeriod;
}

void fill_send_values(void* dst, size_t elements, size_t first_index, const CollectiveSpec& spec,
                      DType dtype, ReduceOp op, int rank, int ranks) {
  const size_t head = std::min(elements, pattern_period(spec, op, ranks));
  for (size_t i = 0; i < head; ++i)
    encode(dst, i, dtype, send_value(spec, op, rank, ranks, first_index + i));
  // [0, done) holds whole periods, so copying it to `done` keeps the phase: doubling runs.
  auto* bytes = static_cast<unsigned char*>(dst);
  const size_t elt = dtype_size(dtype);
  for (size_t done = head; done < elements;) {
    const size_t run = std::min(done, elements - done);
    std::memcpy(bytes + done * elt, bytes, run * elt);
    done += run;
  }
}

double decode_element(const void* data, size_t i, DType dtype) {
  switch (dtype) {
  case DType::f32:
    return static_cast<const float*>(data)[i];
  case DType::i32:
    return static_cast<const int32_t*>(data)[i];
  case DType::bf16:
    return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
  case DType::f16:
    return f16_to_float(static_cast<const uint16_t*>(data)[i]);
  }
  return std::nan("");
}

ResultChecker::ResultChecker(const CollectiveSpec& spec, const CollectiveShape& shape, DType dtype,
                             ReduceOp op, int root, int rank, int ranks)
    : m_spec(spec), m_shape(shape), m_dtype(dtype), m_op(op), m_root(root), m_rank(rank),
      m_ranks(ranks) {
  if (spec.id == Collective::reduce) m_has_output = rank == root;
  if (!spec.reduces) return;
  // The reduction of index i depends on i only through i % period (see send_value), so one
  // period of results serves every element.
  const size_t period = pattern_period(spec, op, ranks);
  for (size_t i = 0; i < period; ++i) {
    double acc = send_value(spec, op, 0, ranks, i);
    for (int r = 1; r < ranks; ++r)
      acc = combine(op, acc, send_value(spec, op, r, ranks, i));
    if (op == ReduceOp::avg) acc /= ranks;
    m_reduced.push_back(round_to(dtype, acc));
  }
}

double ResultChecker::expected(size_t j) const {
  const size_t count = m_shape.count;
  const auto rank = static_cast<size_t>(m_rank);
  switch (m_spec.id) {
  case Collective::all_reduce:
  case Collective::reduce:
    return m_reduced[j % m_reduced.size()];
  case Collective::reduce_scatter:
    return m_reduced[(rank * count + j) % m_reduced.size()];
  case Collective::all_gather:
    return send_value(m_spec, m_op, static_cast<int>(j / count), m_ranks, j % count);
  case Collective::all_to_all:
    return send_value(m_spec, m_op, static_cast<int>(j / count), m_ranks, rank * count + j % count);
  case Collective::broadcast:
    return send_value(m_spec, m_op, m_root, m_ranks, j);
  case Collective::sendrecv:
    return send_value(m_spec, m_op, (m_rank - 1 + m_ranks) % m_ranks, m_ranks, j);
  }
  return std::nan("");
}

// The output is a run of segments (one per source rank for all-gather and all-to-all, else one)
// within which expected() repeats with the pattern's period. Each segment is compared against
// an encoded tile of whole periods with memcmp; only a tile whose bytes differ is compared
// value by value (which also lets +0 match -0), so a correct GiB buffer is checked at memory
// speed and a wrong one still counts every wrong element exactly.
size_t ResultChecker::count_wrong(const void* got) const {
  constexpr size_t kTileElements = 8192;
  const size_t n = output_elements();
  const size_t elt = dtype_size(m_dtype);
  const size_t period = pattern_period(m_spec, m_op, m_ranks);
  const bool per_source =
      m_spec.id == Collective::all_gather || m_spec.id == Collective::all_to_all;
  const size_t segment = std::max<size_t>(1, per_source ? m_shape.count : n);
  const size_t tile = period * std::max<size_t>(1, kTileElements / period);
  std::vector<unsigned char> want(tile * elt);
  const auto* bytes = static_cast<const unsigned char*>(got);
  size_t wrong = 0;
  for (size_t s = 0; s < n; s += segment) {
    const size_t len = std::min(segment, n - s);
    for (size_t t = 0; t < std::min(tile, len); ++t)
      encode(want.data(), t, m_dtype, expected(s + t));
    for (size_t w = s; w < s + len; w += tile) {
      const size_t m = std::min(tile, s + len - w);
      if (std::memcmp(bytes + w * elt, want.data(), m * elt) == 0) continue;
      for (size_t j = w; j < w + m; ++j)
        wrong += decode_element(got, j, m_dtype) == expected(j) ? 0 : 1;
    }
  }
  return wrong;
}

CallBuffers call_buffers(InPlace layout, bool in_place, const CollectiveShape& shape, DType dtype,
                         int rank, const Buffer& a, const Buffer& b) {
  CallBuffers c;
  auto* base = static_cast<char*>(a.data());
  const size_t block = shape.count * dtype_size(dtype) * static_cast<size_t>(rank);
  c.base = base;
  c.in_place = in_place && layout != InPlace::unsupported;
  c.send = base;
  c.recv = c.in_place ? base : b.data();
  if (c.in_place && layout == InPlace::send_in_recv_block) {
    c.send = base + block;
    c.send_offset_bytes = block;
  } else if (c.in_place && layout == InPlace::recv_in_send_block) {
    c.recv = base + block;
  }
  return c;
}

void issue_collective(Communicator& comm, const CollectiveSpec& spec, const CallBuffers& buf,
                      const CollectiveShape& shape, DType dtype, ReduceOp op, int root,
                      Stream stream) {
  const size_t n = shape.count;
  switch (spec.id) {
  case Collective::all_reduce:
    comm.all_reduce(buf.send, buf.recv, n, dtype, op, stream);
    break;
  case Collective::all_gather:
    comm.all_gather(buf.send, buf.recv, n, dtype, stream);
    break;
  case Collective::reduce_scatter:
    comm.reduce_scatter(buf.send, buf.recv, n, dtype, op, stream);
    break;
  case Collective::all_to_all:
    comm.all_to_all(buf.send, buf.recv, n, dtype, stream);
    break;
  case Collective::broadcast:
    comm.broadcast(buf.send, buf.recv, n, dtype, root, stream);
    break;
  case Collective::reduce:
    comm.reduce(buf.send, buf.recv, n, dtype, op, root, stream);
    break;
  case Collective::sendrecv: {
    const int next = (comm.rank() + 1) % comm.size();
    const int prev = (comm.rank() - 1 + comm.size()) % comm.size();
    comm.group_start();
    comm.send(buf.send, n, dtype, next, stream);
    comm.recv(buf.recv, n, dtype, prev, stream);
    comm.group_end();
    break;
  }
  }
}

void upload_inputs(Device& backend, const CollectiveSpec& spec, const CollectiveShape& shape,
                   const CallBuffers& buf, DType dtype, ReduceOp op, int rank, int ranks,
                   std::vector<unsigned char>& staging) {
  const size_t elt = dtype_size(dtype);
  const size_t send_bytes = shape.send_elements * elt;
  const size_t recv_bytes = shape.recv_elements * elt;
  const size_t span = buf.in_place ? std::max(buf.send_offset_bytes + send_bytes, recv_bytes)
                                   : std::max(send_bytes, recv_bytes);
  RIDGELINE_REQUIRE(staging.size() >= span, "upload_inputs: staging buffer too small");
  if (buf.in_place) {
    // The sentinel everywhere the send data are not, so an output left unwritten is caught.
    std::fill(staging.begin(), staging.begin() + static_cast<std::ptrdiff_t>(span), kSentinelByte);
    fill_send_values(staging.data() + buf.send_offset_bytes, shape.send_elements, 0, spec, dtype,
                     op, rank, ranks);
    backend.upload(buf.base, staging.data(), span);
    return;
  }
  fill_send_values(staging.data(), shape.send_elements, 0, spec, dtype, op, rank, ranks);
  backend.upload(buf.send, staging.data(), send_bytes);
  std::fill(staging.begin(), staging.begin() + static_cast<std::ptrdiff_t>(recv_bytes),
            kSentinelByte);
  backend.upload(buf.recv, staging.data(), recv_bytes);
}

int64_t download_and_count_wrong(Device& backend, const ResultChecker& checker,
                                 const CallBuffers& buf, DType dtype,
                                 std::vector<unsigned char>& staging) {
  if (!checker.has_output()) return 0;
  backend.download(staging.data(), buf.recv, checker.output_elements() * dtype_size(dtype));
  return static_cast<int64_t>(checker.count_wrong(staging.data()));
}

// Ordinary least squares on absolute times would be ruled by the largest sizes, whose times are
// orders of magnitude longer: alpha would come out as their noise (often negative). Weighting each
// point by 1 / time^2 minimises the relative error instead, so every size counts alike: the
// latency-bound small sizes set alpha and the bandwidth-bound large ones beta, with no hand-picked
// thresholds that a short sweep might not reach. The model is linear in (alpha, 1/beta), so the
// 2x2 normal equations solve it exactly.
RoofFit fit_alpha_beta(const std::vector<double>& bus_bytes, const std::vector<double>& time_us) {
  RIDGELINE_REQUIRE(bus_bytes.size() == time_us.size(), "fit_alpha_beta: sizes and times differ");
  double sw = 0, swx = 0, swxx = 0, swt = 0, swxt = 0;
  for (size_t i = 0; i < bus_bytes.size(); ++i) {
    RIDGELINE_REQUIRE(time_us[i] > 0, "fit_alpha_beta: times must be > 0");
    const double w = 1.0 / (time_us[i] * time_us[i]);
    const double x = bus_bytes[i];
    sw += w;
    swx += w * x;
    swxx += w * x * x;
    swt += w * time_us[i];
    swxt += w * x * time_us[i];
  }
  const double det = sw * swxx - swx * swx;
  RIDGELINE_REQUIRE(bus_bytes.size() >= 2 && det > 1e-12 * sw * swxx,
                    "fit_alpha_beta: needs at least two distinct sizes");
  double alpha = (swt * swxx - swx * swxt) / det;
  double slope = (sw * swxt - swx * swt) / det; // us per byte
  if (alpha < 0) {
    // A latency below zero is not physical: fit the bandwidth alone through the origin.
    alpha = 0;
    slope = swxt / swxx;
  }
  RoofFit fit;
  fit.alpha_us = alpha;
  // Times that do not grow with size (a sweep of latency-bound sizes only) show no bandwidth
  // limit at all: beta is then infinite.
  fit.beta_gbps = slope > 0 ? 1.0 / (slope * 1e3) : std::numeric_limits<double>::infinity();
  fit.points = bus_bytes.size();
  return fit;
}

// alpha sits 10% below the fastest call so that the line stays strictly under every point: with
// alpha equal to it, the point that set it would leave no room for its own bytes.
void envelope_fit(const std::vector<double>& bus_bytes, const std::vector<double>& min_time_us,
                  double& alpha_us, double& beta_gbps) {
  RIDGELINE_REQUIRE(bus_bytes.size() == min_time_us.size(), "envelope_fit: sizes and times differ");
  double fastest = std::numeric_limits<double>::infinity();
  for (double t : min_time_us)
    if (t > 0) fastest = std::min(fastest, t);
  RIDGELINE_REQUIRE(std::isfinite(fastest), "envelope_fit: needs a point with time > 0");
  alpha_us = 0.9 * fastest;
  double beta = 0;
  for (size_t i = 0; i < bus_bytes.size(); ++i)
    if (min_time_us[i] > 0 && bus_bytes[i] > 0)
      beta = std::max(beta, bus_bytes[i] / ((min_time_us[i] - alpha_us) * 1e3));
  beta_gbps = beta > 0 ? beta : std::numeric_limits<double>::infinity();
}

} // namespace ridgeline
