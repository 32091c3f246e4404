// NCCL implementation of Communicator: every call is enqueued on the given CUDA stream, so
// complete() has nothing to do; bounded waits poll ncclCommGetAsyncError and abort on failure.
#include "collectives/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "core/cuda_check.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/version.hpp"

namespace ridgeline {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
  case DType::f32:
    return ncclFloat32;
  case DType::bf16:
    return ncclBfloat16;
  case DType::f16:
    return ncclFloat16;
  case DType::i32:
    return ncclInt32;
  }
  throw Error("unknown dtype for NCCL");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
  case ReduceOp::sum:
    return ncclSum;
  case ReduceOp::prod:
    return ncclProd;
  case ReduceOp::max:
    return ncclMax;
  case ReduceOp::min:
    return ncclMin;
  case ReduceOp::avg:
    return ncclAvg;
  }
  throw Error("unknown reduce op for NCCL");
}

cudaStream_t cuda_stream(Stream s) {
  return static_cast<cudaStream_t>(s);
}

/// Owns an ncclComm_t: destroyed in the destructor, or aborted (after which nothing is owned).
class NcclComm {
public:
  NcclComm() = default;
  explicit NcclComm(ncclComm_t comm) : m_comm(comm) {}
  NcclComm(NcclComm&& other) noexcept : m_comm(other.m_comm) { other.m_comm = nullptr; }
  NcclComm& operator=(NcclComm&& other) noexcept {
    if (this != &other) {
      reset();
      m_comm = other.m_comm;
      other.m_comm = nullptr;
    }
    return *this;
  }
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  ~NcclComm() { reset(); }

  ncclComm_t get() const { return m_comm; }
  /// Stops every operation in flight and frees the communicator without waiting for peers.
  void abort() noexcept {
    if (m_comm == nullptr) return;
    RIDGELINE_CHECK_NOTHROW(ncclCommAbort(m_comm));
    m_comm = nullptr;
  }

private:
  void reset() noexcept {
    if (m_comm == nullptr) return;
    RIDGELINE_CHECK_NOTHROW(ncclCommDestroy(m_comm));
    m_comm = nullptr;
  }
  ncclComm_t m_comm = nullptr;
};

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define RIDGELINE_NCCL_WINDOWS 1
#else
#define RIDGELINE_NCCL_WINDOWS 0
#endif

std::string nccl_version_string() {
  int v = 0;
  RIDGELINE_CHECK(ncclGetVersion(&v));
  return dotted_version(v);
}

// ncclConfig_t::CTAPolicy from NcclOptions::cta_policy (empty: NCCL's own choice stays).
void set_cta_policy(ncclConfig_t& config, const std::string& name) {
  if (name.empty()) return;
#if RIDGELINE_NCCL_WINDOWS
  int policy = -1;
  if (name == "default") policy = NCCL_CTA_POLICY_DEFAULT;
  if (name == "efficiency") policy = NCCL_CTA_POLICY_EFFICIENCY;
#ifdef NCCL_CTA_POLICY_ZERO
  if (name == "zero") policy = NCCL_CTA_POLICY_ZERO;
#endif
  if (policy >= 0) {
    config.CTAPolicy = policy;
    return;
  }
#else
  (void)config;
#endif
  throw UsageError("NCCL CTA policy '" + name + "' is not in the NCCL this ridgeline was built " +
                   "against (" + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                   "; efficiency needs 2.27, zero 2.28)");
}

#if RIDGELINE_NCCL_WINDOWS
// ncclMemAlloc'd memory registered as one symmetric window of `comm`; deregistered (collective)
// and freed on destruction, unless the communicator was aborted first.
class NcclSymmetricMemory final : public SymmetricMemory {
public:
  NcclSymmetricMemory(const NcclComm& comm, size_t bytes, std::string describe)
      : m_comm(comm), m_bytes(bytes), m_describe(std::move(describe)) {}
  ~NcclSymmetricMemory() override {
    if (m_window != nullptr && m_comm.get() != nullptr)
      RIDGELINE_CHECK_NOTHROW(ncclCommWindowDeregister(m_comm.get(), m_window));
    if (m_data != nullptr) RIDGELINE_CHECK_NOTHROW(ncclMemFree(m_data));
  }
  NcclSymmetricMemory(const NcclSymmetricMemory&) = delete;
  NcclSymmetricMemory& operator=(const NcclSymmetricMemory&) = delete;

  void* data() const override { return m_data; }
  size_t bytes() const override { return m_bytes; }
  std::string describe() const override { return m_describe; }

  // Allocates; returns the error instead of throwing so that the group can agree first.
  ncclResult_t allocate() { return ncclMemAlloc(&m_data, m_bytes); }
  void register_window() {
    RIDGELINE_CHECK(
        ncclCommWindowRegister(m_comm.get(), m_data, m_bytes, &m_window, NCCL_WIN_COLL_SYMMETRIC));
  }

private:
  const NcclComm& m_comm;
  size_t m_bytes = 0;
  std::string m_describe;
  void* m_data = nullptr;
  ncclWindow_t m_window = nullptr;
};
#endif

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(MPI_Comm comm, const NcclOptions& opts)
      : m_timeout_s(opts.timeout_s), m_cta_policy(opts.cta_policy) {
    RIDGELINE_CHECK(MPI_Comm_rank(comm, &m_rank));
    RIDGELINE_CHECK(MPI_Comm_size(comm, &m_size));
    ncclUniqueId id{};
    if (m_rank == 0) RIDGELINE_CHECK(ncclGetUniqueId(&id));
    RIDGELINE_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    if (opts.max_ctas >= 0) config.maxCTAs = opts.max_ctas;
    if (opts.min_ctas >= 0) config.minCTAs = opts.min_ctas;
    set_cta_policy(config, opts.cta_policy);
    ncclComm_t raw = nullptr;
    RIDGELINE_CHECK(ncclCommInitRankConfig(&raw, m_size, id, m_rank, &config));
    m_comm = NcclComm(raw);
    // Symmetric memory agrees on allocation failures over MPI before NCCL's collective register.
    RIDGELINE_CHECK(MPI_Comm_dup(comm, &m_mpi));
  }
  ~NcclCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && m_mpi != MPI_COMM_NULL) MPI_Comm_free(&m_mpi);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return m_rank; }
  int size() const override { return m_size; }
  const char* backend() const override { return "nccl"; }
  bool stream_ordered() const override { return true; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                  Stream stream) override {
    RIDGELINE_CHECK(ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op), comm(),
                                  cuda_stream(stream)));
  }
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype,
                  Stream stream) override {
    RIDGELINE_CHECK(
        ncclAllGather(send, recv, send_count, nccl_type(dtype), comm(), cuda_stream(stream)));
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                      Stream stream) override {
    RIDGELINE_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(dtype), nccl_op(op), comm(),
                                      cuda_stream(stream)));
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype, Stream stream) override {
    // Grouped point-to-point is how NCCL expresses all-to-all; the group makes it one launch.
    const size_t block = count * dtype_size(dtype);
    RIDGELINE_CHECK(ncclGroupStart());
    for (int peer = 0; peer < m_size; ++peer) {
      RIDGELINE_CHECK(ncclSend(static_cast<const char*>(send) + block * peer, count,
                               nccl_type(dtype), peer, comm(), cuda_stream(stream)));
      RIDGELINE_CHECK(ncclRecv(static_cast<char*>(recv) + block * peer, count, nccl_type(dtype),
                               peer, comm(), cuda_stream(stream)));
    }
    RIDGELINE_CHECK(ncclGroupEnd());
  }
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                 Stream stream) override {
    RIDGELINE_CHECK(
        ncclBroadcast(send, recv, count, nccl_type(dtype), root, comm(), cuda_stream(stream)));
  }
  void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
              Stream stream) override {
    RIDGELINE_CHECK(ncclReduce(send, recv, count, nccl_type(dtype), nccl_op(op), root, comm(),
                               cuda_stream(stream)));
  }
  void send(const void* buf, size_t count, DType dtype, int peer, Stream stream) override {
    RIDGELINE_CHECK(ncclSend(buf, count, nccl_type(dtype), peer, comm(), cuda_stream(stream)));
  }
  void recv(void* buf, size_t count, DType dtype, int peer, Stream stream) override {
    RIDGELINE_CHECK(ncclRecv(buf, count, nccl_type(dtype), peer, comm(), cuda_stream(stream)));
  }
  void group_start() override { RIDGELINE_CHECK(ncclGroupStart()); }
  void group_end() override { RIDGELINE_CHECK(ncclGroupEnd()); }
  void complete(Stream) override {}

  std::unique_ptr<SymmetricMemory> symmetric_memory(size_t bytes, std::string& why) override {
#if RIDGELINE_NCCL_WINDOWS
    // NCCL wants windows of a multiple of its alignment.
    const size_t align = NCCL_WIN_REQUIRED_ALIGNMENT;
    const size_t size = std::max<size_t>(align, (bytes + align - 1) / align * align);
    auto mem = std::make_unique<NcclSymmetricMemory>(
        m_comm, size,
        "ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC), NCCL " +
            nccl_version_string() + ", CTA policy " +
            (m_cta_policy.empty() ? std::string("NCCL's (NCCL_CTA_POLICY or default)")
                                  : m_cta_policy));
    const ncclResult_t got = mem->allocate();
    // The first rank that could not allocate (+1; 0 = every rank could), before anyone
    // enters the collective registration.
    int failed = got == ncclSuccess ? 0 : m_rank + 1;
    RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, m_mpi));
    if (failed != 0)
      fail("ncclMemAlloc of " + std::to_string(size) + " bytes of symmetric memory failed on " +
           "communicator rank " + std::to_string(failed - 1) +
           (got != ncclSuccess ? std::string(": ") + ncclGetErrorString(got) : std::string()));
    mem->register_window();
    why.clear();
    return mem;
#else
    (void)bytes;
    why = "NCCL " + nccl_version_string() + " (built against " + std::to_string(NCCL_MAJOR) + "." +
          std::to_string(NCCL_MINOR) + ") has no symmetric windows (2.27 or later)";
    return nullptr;
#endif
  }

  /// See nccl_wait_with_timeout().
  void wait_with_timeout(Stream stream, int timeout_s) {
    const int limit_s = timeout_s > 0 ? timeout_s : m_timeout_s;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    for (;;) {
      ncclResult_t async = ncclSuccess;
      RIDGELINE_CHECK(ncclCommGetAsyncError(comm(), &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        m_comm.abort();
        fail("NCCL asynchronous error: " + std::string(ncclGetErrorString(async)));
      }
      const cudaError_t state = cudaStreamQuery(cuda_stream(stream));
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) {
        m_comm.abort();
        RIDGELINE_CHECK(state);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        m_comm.abort();
        // Which rank this one waits for, from what the ranks of this host published.
        const progress::Board* board = progress::board();
        fail("NCCL operation did not finish within " + std::to_string(limit_s) +
             " s; communicator aborted" + (board != nullptr ? ": " + board->diagnose() : ""));
      }
      // Polling every 100 us keeps the wait cheap without adding visible latency to a timeout.
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

private:
  ncclComm_t comm() const {
    RIDGELINE_REQUIRE(m_comm.get() != nullptr, "NCCL communicator was aborted");
    return m_comm.get();
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw Error("[rank " + std::to_string(error_rank()) + "] (communicator rank " +
                std::to_string(m_rank) + ") " + message);
  }

  NcclComm m_comm;
  MPI_Comm m_mpi = MPI_COMM_NULL;
  int m_rank = 0;
  int m_size = 1;
  int m_timeout_s = 300;
  std::string m_cta_policy;
};

} // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, const NcclOptions& opts) {
  return std::make_unique<NcclCommunicator>(comm, opts);
}

void nccl_wait_with_timeout(Communicator& comm, Stream stream, int timeout_s) {
  auto* nccl = dynamic_cast<NcclCommunicator*>(&comm);
  if (nccl == nullptr) throw UsageError("nccl_wait_with_timeout needs an NCCL communicator");
  nccl->wait_with_timeout(stream, timeout_s);
}

} // namespace ridgeline
