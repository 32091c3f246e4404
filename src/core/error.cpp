// Error formatting and the MPI overload of check().
#include "error.hpp"

#include <mpi.h>

#include <cstdio>
#include <sstream>

namespace ridgeline {
namespace {
int g_rank = -1;

std::string mpi_message(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}
} // namespace

void set_error_rank(int rank) {
  g_rank = rank;
}
int error_rank() {
  return g_rank;
}

void throw_error(const char* file, int line, const char* call, const std::string& message) {
  std::ostringstream out;
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  out << base << ":" << line << ": " << call << ": " << message;
  throw Error(out.str());
}

void check(int mpi_code, const char* call, const char* file, int line) {
  if (mpi_code != MPI_SUCCESS) throw_error(file, line, call, mpi_message(mpi_code));
}

void check_nothrow(int mpi_code, const char* call, const char* file, int line) noexcept {
  if (mpi_code != MPI_SUCCESS)
    std::fprintf(stderr, "[rank %d] %s:%d: %s: %s\n", g_rank, file, line, call,
                 mpi_message(mpi_code).c_str());
}

} // namespace ridgeline
