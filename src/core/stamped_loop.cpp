// The one timed loop (see stamped_loop.hpp).
#include "core/stamped_loop.hpp"

namespace ridgeline {

std::vector<double> ns_per_call(const Recorder& rec, const std::vector<StampedSample>& samples) {
  std::vector<double> ns;
  ns.reserve(samples.size());
  for (const StampedSample& s : samples)
    ns.push_back(s.ns_per_call(rec));
  return ns;
}

} // namespace ridgeline
