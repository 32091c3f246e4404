// One collective's sweep on a live communicator: barriers, warm-up, timed calls or graph
// replays, the max over the group per sample, the exact #wrong check and the roof fits.
#include "collectives/collective_runner.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "collectives/nccl_communicator.hpp"
#include "core/error.hpp"
#include "core/ranges.hpp"
#include "core/stamped_loop.hpp"
#include "core/watchdog.hpp"

namespace ridgeline {
GroupComm::GroupComm(MPI_Comm world, int color, int key) {
  RIDGELINE_CHECK(MPI_Comm_split(world, color, key, &m_comm));
}

GroupComm::~GroupComm() {
  RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_comm));
}

CollectiveBench::CollectiveBench(Device& device, Communicator& comm, MPI_Comm group, MPI_Comm world,
                                 size_t max_bytes)
    : CollectiveBench(device, comm, group, world, max_bytes, device.allocate_bytes(max_bytes),
                      device.allocate_bytes(max_bytes)) {}

CollectiveBench::CollectiveBench(Device& device, Communicator& comm, MPI_Comm group, MPI_Comm world,
                                 size_t max_bytes, Buffer a, Buffer b)
    : m_device(device), m_comm(comm), m_group(group), m_world(world),
      m_stream_ordered(comm.stream_ordered()),
      m_lane(m_stream_ordered ? Lane::comm : Lane::compute), m_a(std::move(a)), m_b(std::move(b)),
      m_staging(max_bytes) {
  RIDGELINE_REQUIRE(m_a.bytes() >= max_bytes && m_b.bytes() >= max_bytes,
                    "collective buffers smaller than the largest size");
}

void CollectiveBench::wait_all(Stream stream, const SweepOptions& opts) {
  if (m_stream_ordered) {
    nccl_wait_with_timeout(m_comm, stream, whole_seconds(opts.timeout_s));
    return;
  }
  m_comm.complete(stream);
  // Another implementation may be stream-ordered on a device beside an MPI communicator (the
  // custom all-reduce when no NCCL collective is swept): wait for the device too.
  if (opts.issue) m_device.synchronize();
}

void CollectiveBench::issue(const CollectiveSpec& spec, const CallBuffers& buf,
                            const CollectiveShape& shape, const SweepOptions& opts, Stream stream) {
  if (opts.issue)
    opts.issue(buf, shape, stream);
  else
    issue_collective(m_comm, spec, buf, shape, opts.dtype, opts.op, opts.root, stream);
}

// The timed part of one size: eager iterations stamped one by one, eager batches stamped whole,
// or the graph's captured launches replayed whole.
std::vector<double> CollectiveBench::time_size(const CollectiveSpec& spec, const CallBuffers& buf,
                                               const CollectiveShape& shape,
                                               const SweepOptions& opts) {
  Stream stream = m_device.stream(m_lane);
  Clock& clock = m_device.clock();
  auto launch = [&] { issue(spec, buf, shape, opts, stream); };
  for (int i = 0; i < opts.warmup; ++i)
    launch();
  // Every rank starts the timed launches together: otherwise the first sample of a size holds
  // the skew with which the ranks left the barrier before the warm-up.
  wait_all(stream, opts);
  RIDGELINE_CHECK(MPI_Barrier(m_world));
  // `samples` samples of `calls` calls of `body`, each between two stamps of its own, each
  // sample's time over `per` of them.
  MarkRecorder rec(clock);
  auto stamped = [&](int calls, int samples, double per, auto&& body) {
    std::vector<StampedSample> marks;
    stamped_loop(
        rec, m_lane, calls, samples, [&](int) { body(); }, marks, SampleMarks::paired);
    wait_all(stream, opts);
    rec.flush();
    std::vector<double> ns;
    for (const StampedSample& s : marks)
      ns.push_back(s.ns(rec) / per);
    return ns;
  };
  if (opts.batch) return stamped(kTimedBatches * opts.iters, kTimedBatches, opts.iters, launch);
  if (!opts.graph) return stamped(opts.iters, opts.iters, 1, launch);
  m_device.capture_begin(m_lane);
  for (int i = 0; i < opts.iters; ++i)
    launch();
  const int graph = m_device.capture_end(m_lane);
  m_device.replay(graph, m_lane); // untimed: the first launch of a graph uploads it
  return stamped(kTimedBatches, kTimedBatches, opts.iters, [&] { m_device.replay(graph, m_lane); });
}

// Fresh inputs, one call, exact comparison of this rank's output: the #wrong of this rank.
int64_t CollectiveBench::check_size(const CollectiveSpec& spec, const CallBuffers& buf,
                                    const CollectiveShape& shape, const SweepOptions& opts) {
  int rank = 0, ranks = 1;
  RIDGELINE_CHECK(MPI_Comm_rank(m_group, &rank));
  RIDGELINE_CHECK(MPI_Comm_size(m_group, &ranks));
  upload_inputs(m_device, spec, shape, buf, opts.dtype, opts.op, rank, ranks, m_staging);
  Stream stream = m_device.stream(m_lane);
  issue(spec, buf, shape, opts, stream);
  wait_all(stream, opts);
  const ResultChecker checker(spec, shape, opts.dtype, opts.op, opts.root, rank, ranks);
  return download_and_count_wrong(m_device, checker, buf, opts.dtype, m_staging);
}

CollectiveResult
CollectiveBench::sweep(const CollectiveSpec& spec, const SweepOptions& opts, Watchdog& watchdog,
                       const std::function<void(const CollectiveResult&)>& on_size) {
  int rank = 0, ranks = 1;
  RIDGELINE_CHECK(MPI_Comm_rank(m_group, &rank));
  RIDGELINE_CHECK(MPI_Comm_size(m_group, &ranks));
  CollectiveResult result;
  result.spec = &spec;
  result.name = opts.name.empty() ? std::string(spec.name) : opts.name;
  const InPlace layout = in_place_layout(spec, m_comm.backend());
  result.in_place = opts.in_place && layout != InPlace::unsupported;
  size_t previous_size = 0;
  for (size_t requested : opts.sizes) {
    const CollectiveShape shape = collective_shape(spec, requested, opts.dtype, ranks);
    if (shape.count == 0 || shape.size_bytes == previous_size) continue;
    previous_size = shape.size_bytes;
    RIDGELINE_REQUIRE(shape.size_bytes <= m_a.bytes(),
                      "CollectiveBench::sweep: a size is larger than the buffers");
    watchdog.rearm(result.name + " of " + std::to_string(shape.size_bytes) +
                   " bytes (a rank or the interconnect is not answering)");
    const ranges::Scope range(
        [&] { return result.name + " " + std::to_string(shape.size_bytes) + " B"; });
    const CallBuffers buf = call_buffers(layout, opts.in_place, shape, opts.dtype, rank, m_a, m_b);
    RIDGELINE_CHECK(MPI_Barrier(m_world));
    std::vector<double> samples = time_size(spec, buf, shape, opts);
    std::vector<double> all_groups = samples;
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, samples.data(), static_cast<int>(samples.size()),
                                  MPI_DOUBLE, MPI_MAX, m_group));
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, all_groups.data(),
                                  static_cast<int>(all_groups.size()), MPI_DOUBLE, MPI_MAX,
                                  m_world));
    int64_t wrong = check_size(spec, buf, shape, opts);
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, m_world));
    SizeRow row;
    row.shape = shape;
    row.time_ns = summarize(samples);
    row.time_mean_all_ns = mean(all_groups);
    row.samples_ns = std::move(samples);
    row.wrong = wrong;
    row.iters = static_cast<int64_t>(opts.iters) * (opts.graph || opts.batch ? kTimedBatches : 1);
    result.rows.push_back(std::move(row));
    if (on_size) on_size(result);
  }
  // Factor 0 (a group of one) moves no bytes between ranks: there is no roof to fit. Every
  // minimum must be timed (> 0, so every median is too) for the envelope to lie under it.
  const double factor = spec.busbw_factor(ranks);
  const bool timed = std::all_of(result.rows.begin(), result.rows.end(),
                                 [](const SizeRow& row) { return row.time_ns.min > 0; });
  if (result.rows.size() < 2 || factor <= 0 || !timed) return result;
  std::vector<double> bus_bytes, p50_us, min_us;
  for (const SizeRow& row : result.rows) {
    bus_bytes.push_back(static_cast<double>(row.shape.size_bytes) * factor);
    p50_us.push_back(row.time_ns.p50 / 1e3);
    min_us.push_back(row.time_ns.min / 1e3);
  }
  // The roof is fitted on the medians: one slow outlier iteration must not move it. The
  // envelope uses the minima: attribution must never find a call faster than its own floor.
  result.fit = fit_alpha_beta(bus_bytes, p50_us);
  envelope_fit(bus_bytes, min_us, result.floor_alpha_us, result.floor_beta_gbps);
  result.fitted = true;
  return result;
}

} // namespace ridgeline
