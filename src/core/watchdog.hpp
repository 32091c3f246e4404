// A bound on how long a phase of a run may take: when a collective hangs (a peer died or was
// stopped, a mismatched call, a wedged interconnect) the rank prints what it was doing and which
// rank it waits for, and exits, which makes mpirun/srun end the whole job instead of leaving it
// waiting forever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core/progress.hpp"

namespace ridgeline {

/// Timeouts at or beyond this many seconds (about 31 years) never expire: the clock's
/// nanosecond count could not hold them.
inline constexpr double kNeverSeconds = 1e9;
/// --timeout when none is given.
inline constexpr double kDefaultTimeoutSeconds = 300;

/// `seconds` as the steady clock's duration, saturated: kNeverSeconds or more (and NaN) gives
/// the largest duration, which time_after() never reaches.
std::chrono::steady_clock::duration timeout_duration(double seconds);
/// `now` + `limit` without overflow: the largest time point when the sum would pass it.
std::chrono::steady_clock::time_point time_after(std::chrono::steady_clock::time_point now,
                                                 std::chrono::steady_clock::duration limit);
/// `seconds` rounded up to whole seconds for an int API (NCCL waits), saturated at INT_MAX.
int whole_seconds(double seconds);

class Watchdog {
public:
  /// Arms the watchdog: if this process makes no progress (no rearm(), no iteration()) for
  /// `seconds` (seen within a quarter of that, at most 10 s, later), it prints "[rank R host] timed
  /// out after S s: <what>[, iteration k]: <which rank it waits for>" and exits with status 124.
  Watchdog(double seconds, std::string what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  /// Starts a new phase (sets its text for the board and the progress line); restarts the
  /// countdown.
  void rearm(std::string what);
  /// A new limit, counted from now (the job's watchdog learns --timeout once the command line is
  /// parsed).
  void set_timeout(double seconds);
  /// Marks iteration `k` of the current phase and so restarts the countdown: relaxed atomic
  /// stores only (no lock, no string), so it may sit inside a timed loop.
  void iteration(int64_t k) { progress::set_iteration(k); }

private:
  void watch();
  double m_seconds;
  bool m_done = false;
  bool m_rearmed = false;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::thread m_thread;
};

} // namespace ridgeline
