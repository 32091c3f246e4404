// The collective benchmark's pure parts (no GPU, no MPI): the registry of collectives with their
// busbw factors and buffer layouts, size sweeps, exact expected values and the #wrong checker,
// and the alpha/beta fits of the interconnect roof. collective_runner.hpp drives them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "core/dtype.hpp"

namespace ridgeline {

enum class Collective : uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  broadcast,
  reduce,
  sendrecv
};

/// Where the send data sit when a collective runs in place.
enum class InPlace : uint8_t {
  same_buffer,        ///< send == recv
  send_in_recv_block, ///< send = recv + rank * count (all-gather)
  recv_in_send_block, ///< recv = send + rank * count (NCCL reduce-scatter)
  unsupported         ///< no in-place form: runs out of place
};

/// One entry of the collective registry: everything the benchmark needs to know about it.
struct CollectiveSpec {
  Collective id;
  const char* name;
  /// busbw = algbw * busbw_factor(ranks) (nccl-tests' convention).
  double (*busbw_factor)(int ranks);
  /// true: the count passed to the call is per rank block, size = count * ranks elements.
  bool per_rank_blocks;
  bool reduces; ///< takes a ReduceOp
  bool rooted;  ///< takes a root
  InPlace in_place_nccl;
  InPlace in_place_mpi;
};

/// Every collective, in the order the benchmark runs and reports them.
const std::vector<CollectiveSpec>& collective_registry();
/// The registry entry called `name`, or nullptr.
const CollectiveSpec* find_collective(const std::string& name);
/// The in-place layout of `spec` on a communicator backend ("nccl" or "mpi").
InPlace in_place_layout(const CollectiveSpec& spec, const std::string& backend);

/// Buffer geometry of one collective at one swept size.
struct CollectiveShape {
  size_t count = 0;         ///< the count argument of the Communicator call (elements)
  size_t send_elements = 0; ///< elements of the send buffer
  size_t recv_elements = 0; ///< elements of the receive buffer
  size_t size_bytes = 0;    ///< nccl-tests "size": bytes of the larger buffer, after rounding
};

/// Rounds `requested_bytes` down to whole elements (and whole per-rank blocks for all-gather,
/// reduce-scatter and all-to-all), as nccl-tests does. count == 0 when nothing is left.
CollectiveShape collective_shape(const CollectiveSpec& spec, size_t requested_bytes, DType dtype,
                                 int ranks);

/// Algorithm bandwidth in GB/s (1e9 B/s): size_bytes / time_ns.
double algbw_gbps(double size_bytes, double time_ns);
/// Bus bandwidth in GB/s: algbw_gbps * spec.busbw_factor(ranks).
double busbw_gbps(const CollectiveSpec& spec, int ranks, double size_bytes, double time_ns);

/// Parses a byte count: digits with an optional K, M, G or T suffix (powers of 1024, any case,
/// an optional trailing B). Throws UsageError naming `option` on anything else or on zero.
size_t parse_size_bytes(const std::string& text, const std::string& option);
/// The most sizes one sweep measures: a plan of more is refused, not run for days.
inline constexpr size_t kMaxSweepSizes = 1000;
/// min_bytes, min_bytes * f, ... while <= max_bytes (each step advances by at least one byte).
/// Throws UsageError if min > max, factor <= 1, a size is zero or the plan holds more than
/// kMaxSweepSizes sizes.
std::vector<size_t> size_sweep(size_t min_bytes, size_t max_bytes, double step_factor);

/// Element `index` of `rank`'s send buffer: a small integer, exact in every dtype. For reducing
/// collectives it is chosen per op so that the reduction over `ranks` ranks is exact too; for
/// the others it varies with the rank so that a misplaced block is caught (see the .cpp).
double send_value(const CollectiveSpec& spec, ReduceOp op, int rank, int ranks, size_t index);
/// Why the expected results of (dtype, op, ranks) would not be exact, or "" when they are.
std::string exactness_problem(DType dtype, ReduceOp op, int ranks);

/// Writes `elements` send values of `rank` (indices first_index, first_index + 1, ...) as raw
/// `dtype` elements to host memory `dst`.
void fill_send_values(void* dst, size_t elements, size_t first_index, const CollectiveSpec& spec,
                      DType dtype, ReduceOp op, int rank, int ranks);

/// Byte pattern of a receive buffer before the checked call: never an expected value.
inline constexpr unsigned char kSentinelByte = 0x7f;

/// The expected output of one collective on one rank, element by element, and the exact
/// comparison that counts #wrong.
class ResultChecker {
public:
  ResultChecker(const CollectiveSpec& spec, const CollectiveShape& shape, DType dtype, ReduceOp op,
                int root, int rank, int ranks);
  /// Whether this rank has a defined output (false for reduce on a non-root rank).
  bool has_output() const { return m_has_output; }
  /// Elements of the output region (shape.recv_elements, or 0 without output).
  size_t output_elements() const { return m_has_output ? m_shape.recv_elements : 0; }
  /// Expected value of output element `j`, already rounded to the dtype (exact by design).
  double expected(size_t j) const;
  /// Number of output elements of `got` (raw dtype elements, host memory) whose value differs
  /// from expected(); NaN never matches, +0 matches -0.
  size_t count_wrong(const void* got) const;

private:
  CollectiveSpec m_spec;
  CollectiveShape m_shape;
  DType m_dtype;
  ReduceOp m_op;
  int m_root;
  int m_rank;
  int m_ranks;
  bool m_has_output = true;
  std::vector<double> m_reduced; ///< reduction over ranks of index i, by i % period
};

/// Send and receive pointers of one call in the benchmark's two buffers (a: send or the one
/// in-place buffer, b: receive).
struct CallBuffers {
  void* send = nullptr;
  void* recv = nullptr;
  void* base = nullptr;         ///< start of buffer a
  size_t send_offset_bytes = 0; ///< of `send` from `base` when in place
  bool in_place = false;        ///< false also when the layout is unsupported
};

/// Pointers of one call: out of place (send = a, recv = b) or in place by `layout` in a.
CallBuffers call_buffers(InPlace layout, bool in_place, const CollectiveShape& shape, DType dtype,
                         int rank, const Buffer& a, const Buffer& b);

/// Issues one collective on `comm` (every member calls; asynchronous as Communicator says).
/// sendrecv is a ring: send to rank + 1 and receive from rank - 1 in one group.
void issue_collective(Communicator& comm, const CollectiveSpec& spec, const CallBuffers& buf,
                      const CollectiveShape& shape, DType dtype, ReduceOp op, int root,
                      Stream stream);

/// Uploads this rank's send values, and the sentinel into every other byte of the output region
/// (synchronous). `staging` is host memory of at least the buffers' size.
void upload_inputs(Device& backend, const CollectiveSpec& spec, const CollectiveShape& shape,
                   const CallBuffers& buf, DType dtype, ReduceOp op, int rank, int ranks,
                   std::vector<unsigned char>& staging);

/// Downloads this rank's output (after the call completed) and counts its wrong elements.
int64_t download_and_count_wrong(Device& backend, const ResultChecker& checker,
                                 const CallBuffers& buf, DType dtype,
                                 std::vector<unsigned char>& staging);

/// Decodes element `i` of raw `dtype` data to a double.
double decode_element(const void* data, size_t i, DType dtype);

/// The interconnect roof of one collective: time_us = alpha_us + bus_bytes / (beta_gbps * 1e3).
struct RoofFit {
  double alpha_us = 0;
  double beta_gbps = 0;
  size_t points = 0; ///< sizes used
};

/// Fits time_us = alpha_us + bus_bytes / (beta_gbps * 1e3) by least squares on the relative
/// error (see the .cpp for why). Needs at least two distinct sizes; throws Error otherwise.
RoofFit fit_alpha_beta(const std::vector<double>& bus_bytes, const std::vector<double>& time_us);

/// The lower envelope of measured minimum times, for attribution: alpha_us + bus_bytes /
/// (beta_gbps * 1e3) <= min_time_us at every point, so no op is ever measured faster than its
/// own roof (which a least-squares fit through the medians does not promise). alpha_us = 0.9 x
/// the smallest positive time; beta_gbps (GB/s) is the smallest bandwidth that keeps every point
/// on or above the line: the max over points of bus_bytes / ((min_time_us - alpha_us) * 1e3).
/// Points with min_time_us <= 0 (not timed) are skipped and points with bus_bytes <= 0 impose
/// nothing on beta; beta_gbps = +inf when no point does. Throws Error when no point has
/// min_time_us > 0 (or the vectors differ in length).
void envelope_fit(const std::vector<double>& bus_bytes, const std::vector<double>& min_time_us,
                  double& alpha_us, double& beta_gbps);

} // namespace ridgeline
