// check() overloads for the CUDA runtime, cuBLAS(Lt) and NCCL status types, used through
// RIDGELINE_CHECK / RIDGELINE_CHECK_NOTHROW; the messages name the rank like every other Error.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/error.hpp"

namespace ridgeline {

/// Throws Error with the CUDA runtime's error name and string unless `code` is cudaSuccess.
void check(cudaError_t code, const char* call, const char* file, int line);
/// Throws Error with cuBLAS's status name and string unless `code` is CUBLAS_STATUS_SUCCESS.
void check(cublasStatus_t code, const char* call, const char* file, int line);
/// Throws Error with ncclGetErrorString() (and ncclGetLastError()) unless `code` is ncclSuccess.
void check(ncclResult_t code, const char* call, const char* file, int line);

/// Non-throwing variants for destructors: report to stderr and return.
void check_nothrow(cudaError_t code, const char* call, const char* file, int line) noexcept;
void check_nothrow(cublasStatus_t code, const char* call, const char* file, int line) noexcept;
void check_nothrow(ncclResult_t code, const char* call, const char* file, int line) noexcept;

} // namespace ridgeline
