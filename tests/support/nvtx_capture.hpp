// A static NVTX injection for tests (CUDA builds): NVTX's loader finds this tool linked into the
// test binary, the way Nsight Systems attaches to a process, and every range pushed or popped in
// a domain is recorded here, so a test sees exactly what a profiler would.
#pragma once

#include <string>
#include <vector>

namespace ridgeline::nvtx_capture {

struct Event {
  bool push = false;
  std::string domain; ///< the domain's name
  std::string name;   ///< the range's message (pushes only)
};

/// Every domain push and pop recorded so far, in order.
std::vector<Event> events();
void clear();
/// Whether NVTX has initialised this injection (on the process's first NVTX call).
bool attached();

} // namespace ridgeline::nvtx_capture
