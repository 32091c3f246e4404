// The custom all-reduce in a build without CUDA: a usage error.
#include "collectives/ipc_allreduce.hpp"
#include "core/error.hpp"

namespace ridgeline {

std::unique_ptr<IpcAllReduce> make_ipc_all_reduce(MPI_Comm, size_t) {
  throw UsageError("the custom all-reduce needs a ridgeline built with CUDA");
}

} // namespace ridgeline
