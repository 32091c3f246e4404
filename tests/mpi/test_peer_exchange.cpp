// The host PeerExchange (MPI messages) under mpiexec -n 2 and 4: every rank puts into every
// peer's window at its own offset and finds each peer's bytes after its waits, over many rounds
// in one window (the messages of a round must not be taken for another's); puts outside a
// window, to itself or to no rank are refused.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/peer_exchange.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

uint8_t byte_of(size_t i, int rank, int round) {
  return static_cast<uint8_t>((i * 13 + static_cast<size_t>(rank) * 59 + round * 5) % 253);
}

TEST(PeerExchangeMpi, EveryPeersBytesEveryRound) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  const size_t piece = 1003;
  auto ex = make_mpi_exchange(MPI_COMM_WORLD, {piece * static_cast<size_t>(size), 8});
  EXPECT_STREQ(ex->backend(), "mpi");
  EXPECT_EQ(ex->size(), size);
  EXPECT_EQ(ex->rank(), rank);
  for (int round = 0; round < 50; ++round) {
    std::vector<uint8_t> mine(piece);
    for (size_t i = 0; i < piece; ++i)
      mine[i] = byte_of(i, rank, round);
    for (int i = 1; i < size; ++i)
      ex->put((rank + i) % size, 0, static_cast<size_t>(rank) * piece, mine.data(), piece, nullptr);
    int64_t wrong = 0;
    for (int i = 1; i < size; ++i) {
      const int from = (rank + size - i) % size;
      ex->wait(from, 0, static_cast<size_t>(from) * piece, piece, nullptr);
      const auto* got = static_cast<const uint8_t*>(ex->window(0)) + from * piece;
      for (size_t k = 0; k < piece; ++k)
        wrong += got[k] != byte_of(k, from, round);
      ex->release(from, 0, nullptr);
    }
    ex->complete(); // `mine` is rewritten next round
    EXPECT_EQ(wrong, 0) << "round " << round;
  }
}

TEST(PeerExchangeMpi, RefusesBadTransfers) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  auto ex = make_mpi_exchange(MPI_COMM_WORLD, {64});
  char buf[128] = {};
  const int next = (rank + 1) % size;
  EXPECT_THROW(ex->put(next, 0, 60, buf, 8, nullptr), Error);
  EXPECT_THROW(ex->put(next, 1, 0, buf, 1, nullptr), Error);
  EXPECT_THROW(ex->put(rank, 0, 0, buf, 1, nullptr), Error);
  EXPECT_THROW(ex->put(size, 0, 0, buf, 1, nullptr), Error);
  EXPECT_THROW(ex->wait(next, 0, 0, 65, nullptr), Error);
  MPI_Barrier(MPI_COMM_WORLD);
}

} // namespace
} // namespace ridgeline
