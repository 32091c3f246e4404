// The NCCL entry points of a build without CUDA: every call is a usage error.
#include "collectives/nccl_communicator.hpp"
#include "core/error.hpp"

namespace ridgeline {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm, const NcclOptions&) {
  throw UsageError("NCCL needs a ridgeline built with CUDA");
}

void nccl_wait_with_timeout(Communicator&, Stream, int) {
  throw UsageError("NCCL needs a ridgeline built with CUDA");
}

} // namespace ridgeline
