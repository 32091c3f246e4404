// PeerExchange over CUDA IPC and the copy engines (see peer_exchange.hpp).
//
// Memory of every rank, one allocation mapped by every peer:
//   [window 0][window 1]...[arrived: windows x kMaxRanks u32][released: windows x kMaxRanks u32]
// A put from rank s into rank d's window w is numbered n (the n-th put from s into (d, w)):
// the stream waits until released[w][d] in s's memory reaches n - 1 (d consumed put n - 1),
// copies into d's window, and writes n into arrived[w][s] of d's memory. d's n-th wait on
// (s, w) holds its stream until its arrived[w][s] reaches n; its n-th release writes n into
// released[w][d] of s's memory. The writes are cuStreamWriteValue32 with its default memory
// barrier (the copy before it is visible first), the waits cuStreamWaitValue32 >=.
#include <cuda.h>
#include <cuda_runtime.h>

#include <string>

#include "collectives/ipc_memory.hpp"
#include "collectives/peer_exchange.hpp"
#include "core/cuda_check.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

constexpr int kMaxRanks = 8;

using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

template <typename Fn> Fn driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  RIDGELINE_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr)
    throw Error(std::string("the CUDA driver has no ") + name +
                " (the copy-engine exchange needs stream memory operations)");
  return reinterpret_cast<Fn>(fn);
}

void check_cu(CUresult code, const char* what) {
  if (code != CUDA_SUCCESS)
    throw Error(std::string("copy-engine exchange: ") + what + " failed with CUresult " +
                std::to_string(static_cast<int>(code)));
}

size_t rounded(size_t b) {
  return (b + 255) / 256 * 256;
}

std::vector<size_t> offsets_of(const std::vector<size_t>& bytes) {
  std::vector<size_t> off;
  size_t at = 0;
  for (size_t b : bytes) {
    off.push_back(at);
    at += rounded(b);
  }
  off.push_back(at); // the flags
  return off;
}

class IpcExchange final : public PeerExchange {
public:
  IpcExchange(MPI_Comm comm, const std::vector<size_t>& window_bytes)
      : m_wait(driver_entry<WaitValueFn>("cuStreamWaitValue32")),
        m_write(driver_entry<WriteValueFn>("cuStreamWriteValue32")), m_bytes(window_bytes),
        m_off(offsets_of(window_bytes)),
        m_memory(comm, m_off.back() + 2 * flag_count() * sizeof(cuuint32_t),
                 "the copy-engine exchange", kMaxRanks) {
    const size_t counters = flag_count();
    m_puts.assign(counters, 0);
    m_waits.assign(counters, 0);
    m_releases.assign(counters, 0);
    // Nobody writes a flag before every peer has mapped every allocation.
    RIDGELINE_CHECK(MPI_Barrier(comm));
  }

  int rank() const override { return m_memory.rank(); }
  int size() const override { return m_memory.size(); }
  const char* backend() const override { return "ipc"; }
  void* window(size_t w) const override { return m_memory.base(rank()) + m_off.at(w); }
  size_t window_bytes(size_t w) const override { return m_bytes.at(w); }

  void put(int peer, size_t w, size_t offset, const void* src, size_t bytes,
           Stream stream) override {
    check(peer, w, offset, bytes);
    const CUstream s = static_cast<CUstream>(stream);
    const cuuint32_t n = ++m_puts[slot(w, peer)];
    if (n > 1)
      check_cu(m_wait(s, flag(rank(), released(w, peer)), n - 1, CU_STREAM_WAIT_VALUE_GEQ),
               "waiting for a peer's release");
    RIDGELINE_CHECK(cudaMemcpyAsync(m_memory.base(peer) + m_off[w] + offset, src, bytes,
                                    cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
    check_cu(m_write(s, flag(peer, arrived(w, rank())), n, CU_STREAM_WRITE_VALUE_DEFAULT),
             "signalling a put");
  }
  void wait(int peer, size_t w, size_t offset, size_t bytes, Stream stream) override {
    check(peer, w, offset, bytes);
    const cuuint32_t n = ++m_waits[slot(w, peer)];
    check_cu(m_wait(static_cast<CUstream>(stream), flag(rank(), arrived(w, peer)), n,
                    CU_STREAM_WAIT_VALUE_GEQ),
             "waiting for a put");
  }
  void release(int peer, size_t w, Stream stream) override {
    check(peer, w, 0, 0);
    const cuuint32_t n = ++m_releases[slot(w, peer)];
    RIDGELINE_REQUIRE(n <= m_waits[slot(w, peer)], "peer exchange: a release without its wait");
    check_cu(m_write(static_cast<CUstream>(stream), flag(peer, released(w, rank())), n,
                     CU_STREAM_WRITE_VALUE_DEFAULT),
             "releasing a window");
  }
  void complete() override {}

private:
  size_t flag_count() const { return m_bytes.size() * kMaxRanks; }
  static size_t slot(size_t w, int r) { return w * kMaxRanks + static_cast<size_t>(r); }
  size_t arrived(size_t w, int r) const { return slot(w, r); }
  size_t released(size_t w, int r) const { return flag_count() + slot(w, r); }
  CUdeviceptr flag(int owner, size_t index) const {
    return reinterpret_cast<CUdeviceptr>(m_memory.base(owner) + m_off.back() +
                                         index * sizeof(cuuint32_t));
  }
  void check(int peer, size_t w, size_t offset, size_t bytes) const {
    RIDGELINE_REQUIRE(peer >= 0 && peer < size() && peer != rank(), "peer exchange: bad peer");
    RIDGELINE_REQUIRE(w < m_bytes.size() && offset + bytes <= m_bytes[w],
                      "peer exchange: a transfer outside its window");
  }

  WaitValueFn m_wait;
  WriteValueFn m_write;
  std::vector<size_t> m_bytes, m_off;
  IpcPeerMemory m_memory;
  std::vector<cuuint32_t> m_puts, m_waits, m_releases; ///< per (window, peer)
};

} // namespace

std::unique_ptr<PeerExchange> make_ipc_exchange(MPI_Comm comm,
                                                const std::vector<size_t>& window_bytes) {
  return std::make_unique<IpcExchange>(comm, window_bytes);
}

} // namespace ridgeline
