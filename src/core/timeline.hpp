// The per-rank timeline: an explicit op table, a backend clock, and the recorder that turns
// begin/end stamps into TimelineRecord rows (the /ranks/<r>/timeline schema).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/ranges.hpp"

namespace ridgeline {

/// Where an op runs: the compute stream, the collective stream, or point-to-point transfers.
enum class Lane : uint8_t { compute = 0, comm = 1, p2p = 2 };
constexpr int kLaneCount = 3;
const char* lane_name(Lane lane);

/// What an op is; stored in /ops so that reports can group and attribute.
enum class OpKind : uint8_t {
  gemm = 0,
  attention = 1,
  norm = 2,
  elementwise = 3,
  collective = 4,
  p2p = 5,
  other = 6
};
const char* op_kind_name(OpKind kind);
OpKind parse_op_kind(const std::string& name);

/// Work done by one op instance: FLOPs, HBM (or DRAM) bytes moved, interconnect bytes sent.
struct OpCost {
  double flops = 0;
  double hbm_bytes = 0;
  double comm_bytes = 0;
};

/// The work of two ops (or parts of one) together.
inline OpCost operator+(const OpCost& a, const OpCost& b) {
  return OpCost{a.flops + b.flops, a.hbm_bytes + b.hbm_bytes, a.comm_bytes + b.comm_bytes};
}

/// The cost of `share` of an op (a unit, a chunk or a part of its site).
inline OpCost scaled(const OpCost& c, double share) {
  return OpCost{c.flops * share, c.hbm_bytes * share, c.comm_bytes * share};
}

/// One row of /ranks/<r>/timeline. The layout is the file's compound type: change both together.
struct TimelineRecord {
  int32_t op_id;
  int32_t layer;
  int32_t microbatch;
  int32_t iteration;
  uint8_t lane;
  uint8_t warmup;     ///< 1 for warm-up iterations (recorded, never summarised)
  int64_t t_start_ns; ///< since this rank's epoch (taken right after a barrier)
  int64_t t_end_ns;
  double flops;
  double hbm_bytes;
  double comm_bytes;
};

/// Op name table: id -> (name, kind). Ids are dense and assigned in first-use order.
class OpTable {
public:
  /// Returns the id of `name`, adding it if new. Throws if it exists with another kind.
  int32_t intern(const std::string& name, OpKind kind);
  /// Id of an existing op, or -1.
  int32_t find(const std::string& name) const;
  size_t size() const { return m_names.size(); }
  const std::string& name(int32_t id) const { return m_names.at(static_cast<size_t>(id)); }
  OpKind kind(int32_t id) const { return m_kinds.at(static_cast<size_t>(id)); }

private:
  std::vector<std::string> m_names;
  std::vector<OpKind> m_kinds;
};

/// A backend's time source. Host: steady_clock read at once. CUDA: events recorded on the
/// lane's stream and resolved after the timed loop, so the loop never synchronises.
class Clock {
public:
  virtual ~Clock() = default;
  /// Marks t = 0 for this rank. Every rank calls it right after a barrier.
  virtual void start_epoch() = 0;
  /// Records a time stamp on `lane` (asynchronous on GPUs); returns its index.
  virtual size_t stamp(Lane lane) = 0;
  /// Waits for all stamps since the last collect() and returns them in ns since the epoch.
  virtual std::vector<int64_t> collect() = 0;
  /// "steady_clock" or "cuda_event".
  virtual const char* name() const = 0;
};

/// Clock for the host backend: std::chrono::steady_clock.
class HostClock final : public Clock {
public:
  void start_epoch() override;
  size_t stamp(Lane lane) override;
  std::vector<int64_t> collect() override;
  const char* name() const override { return "steady_clock"; }

private:
  int64_t m_epoch_ns = 0;
  std::vector<int64_t> m_stamps;
};

/// Collects timeline rows for one rank. begin()/end() cost two clock stamps and no sync.
class Recorder {
public:
  Recorder(Clock& clock, OpTable& ops) : m_clock(clock), m_ops(ops) {}

  /// While disabled, begin()/end() record nothing (used for uninstrumented reference runs).
  void set_enabled(bool enabled) { m_enabled = enabled; }
  bool enabled() const { return m_enabled; }
  void set_iteration(int32_t iteration, bool warmup) {
    m_iteration = iteration;
    m_warmup = warmup;
  }
  void set_microbatch(int32_t microbatch) { m_microbatch = microbatch; }

  /// Opens an op instance recorded as `lane`, stamped on the queue of `queue` (an op may be
  /// recorded as comm yet run on the compute queue when overlap is off); returns a handle.
  size_t begin(int32_t op_id, int32_t layer, Lane lane, const OpCost& cost, Lane queue);
  size_t begin(int32_t op_id, int32_t layer, Lane lane, const OpCost& cost) {
    return begin(op_id, layer, lane, cost, lane);
  }
  void end(size_t handle);
  /// A bare time stamp on `queue` (not a timeline row), e.g. around a whole loop; its time is
  /// mark_ns(handle) after the next flush(). Recorded even while disabled.
  size_t mark(Lane queue);
  int64_t mark_ns(size_t handle) const { return m_mark_ns.at(handle); }
  /// Converts pending stamps into rows (waits for the device). Call outside timed regions.
  void flush();
  const std::vector<TimelineRecord>& records() const { return m_records; }
  std::vector<TimelineRecord>& records() { return m_records; }
  OpTable& ops() { return m_ops; }
  Clock& clock() { return m_clock; }

private:
  struct Pending {
    TimelineRecord row;
    Lane queue;
    size_t start_stamp;
    size_t end_stamp;
  };
  Clock& m_clock;
  OpTable& m_ops;
  bool m_enabled = true;
  int32_t m_iteration = 0;
  bool m_warmup = false;
  int32_t m_microbatch = 0;
  std::vector<Pending> m_pending;
  std::vector<TimelineRecord> m_records;
  std::vector<size_t> m_mark_stamps; ///< clock stamp of each mark, pending until flush()
  std::vector<int64_t> m_mark_ns;    ///< resolved marks, indexed by mark handle
};

namespace detail {
struct EmptyOpTable {
  OpTable table;
};
} // namespace detail

/// A Recorder of bare marks only (stamped_loop's sample bounds): it records no op, so the op
/// table it needs is its own and stays empty. The table is a base so that it exists before the
/// Recorder that refers to it.
class MarkRecorder : private detail::EmptyOpTable, public Recorder {
public:
  explicit MarkRecorder(Clock& clock) : Recorder(clock, table) {}
  // A copy's Recorder would refer to the original's table.
  MarkRecorder(const MarkRecorder&) = delete;
  MarkRecorder& operator=(const MarkRecorder&) = delete;
};

/// RAII op scope: the op's profiler range (named as in the op table) and begin() in the
/// constructor, end() and the range's end in the destructor.
class ScopedOp {
public:
  ScopedOp(Recorder& rec, int32_t op_id, int32_t layer, Lane lane, const OpCost& cost, Lane queue)
      : m_range(rec.ops().name(op_id)), m_rec(rec),
        m_handle(rec.begin(op_id, layer, lane, cost, queue)) {}
  ~ScopedOp() { m_rec.end(m_handle); }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

private:
  ranges::Scope m_range;
  Recorder& m_rec;
  size_t m_handle;
};

} // namespace ridgeline
