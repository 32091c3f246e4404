// Error type and the check() family: every failing library call becomes a ridgeline::Error
// that names the rank, the call text and the library's own message.
#pragma once

#include <stdexcept>
#include <string>

namespace ridgeline {

/// Thrown for every failure ridgeline detects; main() prints it once and aborts the job.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Thrown for invalid user input (configuration, arguments, files); exit code 2 instead of 1.
class UsageError : public Error {
public:
  using Error::Error;
};

/// Sets the rank named in every error message of this process (called once by MpiSession).
void set_error_rank(int rank);
/// The rank set by set_error_rank(), or -1 before MPI is up.
int error_rank();

/// Builds "[rank R] file:line: call: message" and throws Error.
[[noreturn]] void throw_error(const char* file, int line, const char* call,
                              const std::string& message);

/// MPI return codes (ints).
void check(int mpi_code, const char* call, const char* file, int line);

/// Non-throwing variant for destructors: reports to stderr and returns.
void check_nothrow(int mpi_code, const char* call, const char* file, int line) noexcept;

} // namespace ridgeline

#define RIDGELINE_CHECK(call) ::ridgeline::check((call), #call, __FILE__, __LINE__)
#define RIDGELINE_CHECK_NOTHROW(call) ::ridgeline::check_nothrow((call), #call, __FILE__, __LINE__)
#define RIDGELINE_REQUIRE(cond, msg)                                                               \
  do {                                                                                             \
    if (!(cond)) ::ridgeline::throw_error(__FILE__, __LINE__, #cond, (msg));                       \
  } while (0)
