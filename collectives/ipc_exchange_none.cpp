// The copy-engine exchange in a build without CUDA: a usage error.
#include "collectives/peer_exchange.hpp"
#include "core/error.hpp"

namespace ridgeline {

std::unique_ptr<PeerExchange> make_ipc_exchange(MPI_Comm, const std::vector<size_t>&) {
  throw UsageError("the copy-engine exchange needs a ridgeline built with CUDA");
}

} // namespace ridgeline
