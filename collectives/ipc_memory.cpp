// IpcPeerMemory: cudaMalloc, cudaIpcGetMemHandle, an all-gather of the handles, and
// cudaIpcOpenMemHandle of every peer's.
#include "collectives/ipc_memory.hpp"

#include <cuda_runtime.h>

#include <string>

#include "core/cuda_check.hpp"
#include "core/error.hpp"

namespace ridgeline {

IpcPeerMemory::IpcPeerMemory(MPI_Comm comm, size_t bytes, const char* what, int max_ranks) {
  RIDGELINE_CHECK(MPI_Comm_rank(comm, &m_rank));
  RIDGELINE_CHECK(MPI_Comm_size(comm, &m_size));
  if (m_size > max_ranks)
    throw Error(std::string(what) + " takes at most " + std::to_string(max_ranks) + " ranks");
  m_base.assign(static_cast<size_t>(m_size), nullptr);
  // Every step that may fail on one rank is agreed on before the next collective, so that a
  // failure throws on every rank instead of leaving the others waiting.
  void* own = nullptr;
  cudaIpcMemHandle_t mine{};
  cudaError_t status = cudaMalloc(&own, bytes);
  if (status == cudaSuccess) {
    m_base[static_cast<size_t>(m_rank)] = static_cast<char*>(own);
    status = cudaMemset(own, 0, bytes);
    if (status == cudaSuccess) status = cudaDeviceSynchronize();
    if (status == cudaSuccess) status = cudaIpcGetMemHandle(&mine, own);
  }
  agree(comm, status == cudaSuccess,
        std::string(what) + ": " + std::to_string(bytes) + " bytes of shareable device memory (" +
            cudaGetErrorString(status) + ")");
  std::vector<cudaIpcMemHandle_t> all(static_cast<size_t>(m_size));
  RIDGELINE_CHECK(
      MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm));
  std::string failure;
  for (int r = 0; r < m_size && failure.empty(); ++r) {
    if (r == m_rank) continue;
    void* p = nullptr;
    status = cudaIpcOpenMemHandle(&p, all[static_cast<size_t>(r)], cudaIpcMemLazyEnablePeerAccess);
    if (status != cudaSuccess)
      failure = std::string(what) + ": rank " + std::to_string(m_rank) + " cannot map rank " +
                std::to_string(r) + "'s memory through CUDA IPC (" + cudaGetErrorString(status) +
                "): the ranks must share a node";
    else
      m_base[static_cast<size_t>(r)] = static_cast<char*>(p);
  }
  agree(comm, failure.empty(), failure);
}

void IpcPeerMemory::agree(MPI_Comm comm, bool mine, const std::string& failure) {
  int ok = mine ? 1 : 0;
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm));
  if (ok == 1) return;
  release();
  throw Error(mine ? std::string("another rank of the group could not set up its peer memory")
                   : failure);
}

IpcPeerMemory::~IpcPeerMemory() {
  release();
}

void IpcPeerMemory::release() noexcept {
  for (int r = 0; r < m_size; ++r) {
    char*& p = m_base[static_cast<size_t>(r)];
    if (p == nullptr) continue;
    if (r == m_rank)
      RIDGELINE_CHECK_NOTHROW(cudaFree(p));
    else
      RIDGELINE_CHECK_NOTHROW(cudaIpcCloseMemHandle(p));
    p = nullptr;
  }
}

} // namespace ridgeline
