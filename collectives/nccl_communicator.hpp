// The NCCL implementation of Communicator (stream-ordered collectives on the GPU) and the
// bounded wait that turns a hung or failed NCCL operation into an Error naming the rank.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "collectives/communicator.hpp"

namespace ridgeline {

/// NCCL communicator settings; a negative value keeps NCCL's default.
struct NcclOptions {
  int max_ctas = -1; ///< ncclConfig_t::maxCTAs (channels NCCL may use)
  int min_ctas = -1; ///< ncclConfig_t::minCTAs
  /// ncclConfig_t::CTAPolicy: "default", "efficiency" (the fewest CTAs that keep the bandwidth)
  /// or "zero" (no CTA where NCCL can: copy-engine collectives on symmetric windows, NCCL >=
  /// 2.28); empty leaves NCCL's (its NCCL_CTA_POLICY environment variable, else default).
  std::string cta_policy;
  int timeout_s = 300; ///< default bound of nccl_wait_with_timeout() when it is given <= 0
};

/// Every rank of comm calls. Creates an NCCL communicator over `comm` on the calling thread's
/// current CUDA device (rank 0 makes the unique id and broadcasts it over MPI).
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, const NcclOptions& opts);

/// Blocks until everything issued on `stream` has finished, polling the stream and NCCL's
/// asynchronous error. On an NCCL error or after `timeout_s` seconds (<= 0: the communicator's
/// NcclOptions::timeout_s) it aborts the communicator and throws Error naming the rank.
/// `comm` must come from make_nccl_communicator() (UsageError otherwise).
void nccl_wait_with_timeout(Communicator& comm, Stream stream, int timeout_s);

} // namespace ridgeline
