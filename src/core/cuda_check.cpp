// The CUDA, cuBLAS and NCCL overloads of check(): every failure becomes an Error that names the
// rank, the call text, and the library's own description of the status.
#include "core/cuda_check.hpp"

#include <cstdio>
#include <string>

namespace ridgeline {
namespace {

std::string with_rank(const std::string& message) {
  return "[rank " + std::to_string(error_rank()) + "] " + message;
}

std::string cuda_message(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
}

std::string cublas_message(cublasStatus_t code) {
  return std::string(cublasLtGetStatusName(code)) + ": " + cublasLtGetStatusString(code);
}

std::string nccl_message(ncclResult_t code) {
  std::string text = ncclGetErrorString(code);
  // The last error carries the detail (which peer, which transport) for system/internal errors.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && last[0] != '\0') text += " (" + std::string(last) + ")";
  return text;
}

void report(const char* file, int line, const char* call, const std::string& message) noexcept {
  std::fprintf(stderr, "[rank %d] %s:%d: %s: %s\n", error_rank(), file, line, call,
               message.c_str());
}

} // namespace

void check(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) throw_error(file, line, call, with_rank(cuda_message(code)));
}

void check(cublasStatus_t code, const char* call, const char* file, int line) {
  if (code != CUBLAS_STATUS_SUCCESS) throw_error(file, line, call, with_rank(cublas_message(code)));
}

void check(ncclResult_t code, const char* call, const char* file, int line) {
  if (code != ncclSuccess) throw_error(file, line, call, with_rank(nccl_message(code)));
}

void check_nothrow(cudaError_t code, const char* call, const char* file, int line) noexcept {
  if (code != cudaSuccess) report(file, line, call, cuda_message(code));
}

void check_nothrow(cublasStatus_t code, const char* call, const char* file, int line) noexcept {
  if (code != CUBLAS_STATUS_SUCCESS) report(file, line, call, cublas_message(code));
}

void check_nothrow(ncclResult_t code, const char* call, const char* file, int line) noexcept {
  if (code != ncclSuccess) report(file, line, call, nccl_message(code));
}

} // namespace ridgeline
