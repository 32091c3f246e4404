// PeerExchange over MPI point-to-point (host memory): a put is a non-blocking send tagged by the
// window, a wait the blocking receive of it into the window, a release nothing (the receive
// itself says where the bytes go). Messages between two ranks on one tag arrive in the order
// they were sent, which is the order of the puts.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "collectives/peer_exchange.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

constexpr int kTagBase = 7100;

class MpiExchange final : public PeerExchange {
public:
  MpiExchange(MPI_Comm comm, const std::vector<size_t>& window_bytes) : m_bytes(window_bytes) {
    // The only collective first: an allocation that fails on one rank then leaves no other
    // rank waiting here.
    RIDGELINE_CHECK(MPI_Comm_dup(comm, &m_comm));
    RIDGELINE_CHECK(MPI_Comm_rank(m_comm, &m_rank));
    RIDGELINE_CHECK(MPI_Comm_size(m_comm, &m_size));
    for (size_t b : m_bytes) {
      void* p = std::aligned_alloc(64, std::max<size_t>(64, (b + 63) / 64 * 64));
      if (p == nullptr) {
        for (void* q : m_windows)
          std::free(q);
        RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_comm));
        throw Error("host allocation of a " + std::to_string(b) + "-byte window");
      }
      m_windows.push_back(p);
    }
  }
  ~MpiExchange() override {
    if (!m_sends.empty())
      RIDGELINE_CHECK_NOTHROW(
          MPI_Waitall(static_cast<int>(m_sends.size()), m_sends.data(), MPI_STATUSES_IGNORE));
    for (void* p : m_windows)
      std::free(p);
    RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_comm));
  }

  int rank() const override { return m_rank; }
  int size() const override { return m_size; }
  const char* backend() const override { return "mpi"; }
  void* window(size_t w) const override { return m_windows.at(w); }
  size_t window_bytes(size_t w) const override { return m_bytes.at(w); }

  void put(int peer, size_t w, size_t offset, const void* src, size_t bytes, Stream) override {
    check(peer, w, offset, bytes);
    MPI_Request r = MPI_REQUEST_NULL;
    RIDGELINE_CHECK(MPI_Isend(src, static_cast<int>(bytes), MPI_BYTE, peer, tag(w), m_comm, &r));
    m_sends.push_back(r);
  }
  void wait(int peer, size_t w, size_t offset, size_t bytes, Stream) override {
    check(peer, w, offset, bytes);
    RIDGELINE_CHECK(MPI_Recv(static_cast<char*>(m_windows[w]) + offset, static_cast<int>(bytes),
                             MPI_BYTE, peer, tag(w), m_comm, MPI_STATUS_IGNORE));
  }
  void release(int peer, size_t w, Stream) override { check(peer, w, 0, 0); }
  void complete() override {
    if (m_sends.empty()) return;
    RIDGELINE_CHECK(
        MPI_Waitall(static_cast<int>(m_sends.size()), m_sends.data(), MPI_STATUSES_IGNORE));
    m_sends.clear();
  }

private:
  static int tag(size_t w) { return kTagBase + static_cast<int>(w); }
  void check(int peer, size_t w, size_t offset, size_t bytes) const {
    RIDGELINE_REQUIRE(peer >= 0 && peer < m_size && peer != m_rank, "peer exchange: bad peer");
    RIDGELINE_REQUIRE(w < m_bytes.size() && offset + bytes <= m_bytes[w],
                      "peer exchange: a transfer outside its window");
    RIDGELINE_REQUIRE(bytes <= static_cast<size_t>(INT_MAX),
                      "peer exchange: a message of 2 GiB or more");
  }

  MPI_Comm m_comm = MPI_COMM_NULL;
  int m_rank = 0, m_size = 1;
  std::vector<size_t> m_bytes;
  std::vector<void*> m_windows;
  std::vector<MPI_Request> m_sends;
};

} // namespace

std::unique_ptr<PeerExchange> make_mpi_exchange(MPI_Comm comm,
                                                const std::vector<size_t>& window_bytes) {
  return std::make_unique<MpiExchange>(comm, window_bytes);
}

} // namespace ridgeline
