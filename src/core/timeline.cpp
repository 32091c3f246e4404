// Op table, host clock and recorder.
#include "timeline.hpp"

#include <chrono>

#include "error.hpp"

namespace ridgeline {
namespace {
int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
constexpr size_t kNoStamp = static_cast<size_t>(-1);
} // namespace

const char* lane_name(Lane lane) {
  switch (lane) {
  case Lane::compute:
    return "compute";
  case Lane::comm:
    return "comm";
  case Lane::p2p:
    return "p2p";
  }
  return "?";
}

static const char* const kKindNames[] = {"gemm",       "attention", "norm", "elementwise",
                                         "collective", "p2p",       "other"};

const char* op_kind_name(OpKind kind) {
  return kKindNames[static_cast<int>(kind)];
}

OpKind parse_op_kind(const std::string& name) {
  for (int i = 0; i < 7; ++i)
    if (name == kKindNames[i]) return static_cast<OpKind>(i);
  throw Error("unknown op kind '" + name + "'");
}

int32_t OpTable::intern(const std::string& name, OpKind kind) {
  const int32_t existing = find(name);
  if (existing >= 0) {
    if (m_kinds[static_cast<size_t>(existing)] != kind)
      throw Error("op '" + name + "' registered twice with different kinds");
    return existing;
  }
  m_names.push_back(name);
  m_kinds.push_back(kind);
  return static_cast<int32_t>(m_names.size() - 1);
}

int32_t OpTable::find(const std::string& name) const {
  for (size_t i = 0; i < m_names.size(); ++i)
    if (m_names[i] == name) return static_cast<int32_t>(i);
  return -1;
}

void HostClock::start_epoch() {
  m_stamps.clear();
  m_epoch_ns = steady_ns();
}

size_t HostClock::stamp(Lane) {
  m_stamps.push_back(steady_ns() - m_epoch_ns);
  return m_stamps.size() - 1;
}

std::vector<int64_t> HostClock::collect() {
  std::vector<int64_t> out;
  out.swap(m_stamps);
  return out;
}

size_t Recorder::begin(int32_t op_id, int32_t layer, Lane lane, const OpCost& cost, Lane queue) {
  if (!m_enabled) return kNoStamp;
  Pending p{};
  p.row.op_id = op_id;
  p.row.layer = layer;
  p.row.microbatch = m_microbatch;
  p.row.iteration = m_iteration;
  p.row.lane = static_cast<uint8_t>(lane);
  p.row.warmup = m_warmup ? 1 : 0;
  p.row.flops = cost.flops;
  p.row.hbm_bytes = cost.hbm_bytes;
  p.row.comm_bytes = cost.comm_bytes;
  p.queue = queue;
  p.start_stamp = m_clock.stamp(queue);
  p.end_stamp = kNoStamp;
  m_pending.push_back(p);
  return m_pending.size() - 1;
}

void Recorder::end(size_t handle) {
  if (handle == kNoStamp) return;
  Pending& p = m_pending.at(handle);
  p.end_stamp = m_clock.stamp(p.queue);
}

size_t Recorder::mark(Lane queue) {
  m_mark_stamps.push_back(m_clock.stamp(queue));
  return m_mark_ns.size() + m_mark_stamps.size() - 1;
}

void Recorder::flush() {
  const std::vector<int64_t> stamps = m_clock.collect();
  for (size_t s : m_mark_stamps)
    m_mark_ns.push_back(stamps.at(s));
  m_mark_stamps.clear();
  for (Pending& p : m_pending) {
    if (p.end_stamp == kNoStamp) throw Error("timeline: op began but never ended");
    p.row.t_start_ns = stamps.at(p.start_stamp);
    p.row.t_end_ns = stamps.at(p.end_stamp);
    m_records.push_back(p.row);
  }
  m_pending.clear();
}

} // namespace ridgeline
