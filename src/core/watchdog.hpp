// A bound on how long a phase of a run may take: when a collective hangs (a peer died, a
// mismatched call, a wedged interconnect) the rank prints what it was doing and exits, which
// makes mpirun/srun end the whole job instead of leaving it waiting forever.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ridgeline {

class Watchdog {
 public:
  /// Arms the watchdog: if not destroyed (or re-armed) within `seconds`, the process prints
  /// "[rank R] timed out after S s: <what>" and exits with status 124.
  Watchdog(double seconds, std::string what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  /// Restarts the countdown for a new phase.
  void rearm(std::string what);

 private:
  void watch();
  double m_seconds;
  std::string m_what;
  bool m_done = false;
  bool m_rearmed = false;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::thread m_thread;
};

}  // namespace ridgeline
