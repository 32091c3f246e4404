// The software-stack fingerprint: library versions, build, performance-relevant environment,
// and each rank's host and device. Every output file stores it; `ridgeline env` prints it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "app/run_data.hpp"
#include "core/mpi_session.hpp"

namespace ridgeline {

/// Versions and build facts of this process (/stack attributes).
Attrs stack_attrs();
/// How the job's nodes were named: `node_names` = RIDGELINE_NODE_NAME where any rank's node name
/// came from it, nothing where every rank's is its host name (/stack attributes).
Attrs node_name_attrs(const MpiSession& mpi);
/// NCCL_*, CUDA_*, OMPI_*, UCX_*, SLURM_*, OMP_*, OPENBLAS_*, CUBLAS*, RIDGELINE_*, PMIX_RANK... as
/// set now, sorted.
std::vector<std::pair<std::string, std::string>> performance_env();
/// This rank's host and device facts (one /topology entry); `extra` is appended (grid coords).
Attrs rank_topology(const MpiSession& mpi, const std::string& backend, int device,
                    const Attrs& extra);
/// Every rank calls: gathers each rank's Attrs to rank 0 (other ranks get an empty vector).
std::vector<Attrs> gather_attrs(MPI_Comm comm, const Attrs& mine);

} // namespace ridgeline
