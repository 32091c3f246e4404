// The program's MpiSession in a test binary linked with ridgeline_test_session_main: suites
// that build what a command builds (a JobContext, a CommandContext) take it from here.
#pragma once

#include "core/mpi_session.hpp"

namespace ridgeline {

/// The session the test main opened (every rank; valid for the whole test run).
MpiSession& test_session();

} // namespace ridgeline
