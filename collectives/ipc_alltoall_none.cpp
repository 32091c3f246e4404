// The all-to-all-v over CUDA IPC in a build without CUDA: a usage error.
#include "collectives/ipc_alltoall.hpp"
#include "core/error.hpp"

namespace ridgeline {

std::unique_ptr<IpcAllToAll> make_ipc_all_to_all(MPI_Comm, size_t) {
  throw UsageError("--a2a ipc needs a ridgeline built with CUDA");
}

} // namespace ridgeline
