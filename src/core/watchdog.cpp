// Watchdog thread: wakes a few times a second, restarts its countdown whenever the process's
// position (phase, iteration) moved, and on expiry reads the progress board to name the rank
// that is missing.
#include "core/watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"

namespace ridgeline {
namespace {

// How often the thread looks at the position: a quarter of the timeout (a stall is seen within
// 1.25 timeouts), between 0.25 s and 10 s, so that it seldom wakes beside a measurement.
std::chrono::steady_clock::duration poll_period(double seconds) {
  const double poll_s = std::min(10.0, std::max(0.25, seconds / 4));
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(poll_s));
}

// This process's rank for the message: MPI's once it is up, before that the launcher's.
int rank_for_message() {
  if (error_rank() >= 0) return error_rank();
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0')
      return std::atoi(value);
  return -1;
}

} // namespace

std::chrono::steady_clock::duration timeout_duration(double seconds) {
  using duration = std::chrono::steady_clock::duration;
  if (!(seconds < kNeverSeconds)) return duration::max();
  return std::chrono::duration_cast<duration>(
      std::chrono::duration<double>(std::max(0.0, seconds)));
}

std::chrono::steady_clock::time_point time_after(std::chrono::steady_clock::time_point now,
                                                 std::chrono::steady_clock::duration limit) {
  using time_point = std::chrono::steady_clock::time_point;
  return limit > time_point::max() - now ? time_point::max() : now + limit;
}

int whole_seconds(double seconds) {
  if (!(seconds < static_cast<double>(INT_MAX))) return INT_MAX;
  return static_cast<int>(std::ceil(std::max(0.0, seconds)));
}

Watchdog::Watchdog(double seconds, std::string what) : m_seconds(seconds) {
  progress::set_phase(what);
  m_thread = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_done = true;
  }
  m_cv.notify_all();
  m_thread.join();
}

void Watchdog::rearm(std::string what) {
  progress::set_phase(what);
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_rearmed = true;
  }
  m_cv.notify_all();
}

void Watchdog::set_timeout(double seconds) {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_seconds = seconds;
    m_rearmed = true;
  }
  m_cv.notify_all();
}

void Watchdog::watch() {
  using clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(m_mutex);
  auto limit = timeout_duration(m_seconds);
  auto poll = poll_period(m_seconds);
  auto position = progress::position();
  auto deadline = time_after(clock::now(), limit);
  for (;;) {
    m_cv.wait_until(lock, std::min(deadline, clock::now() + poll),
                    [this] { return m_done || m_rearmed; });
    if (m_done) return;
    const auto now_at = progress::position();
    if (m_rearmed || now_at != position) {
      m_rearmed = false;
      limit = timeout_duration(m_seconds);
      poll = poll_period(m_seconds);
      position = now_at;
      deadline = time_after(clock::now(), limit);
      continue;
    }
    if (clock::now() < deadline) continue;
    // The job's watchdog and a phase's may expire together: one of them speaks.
    static std::atomic<bool> fired{false};
    if (fired.exchange(true)) continue;
    char host[HOST_NAME_MAX + 1] = {};
    gethostname(host, sizeof(host) - 1);
    std::string what = progress::phase();
    if (position.second >= 0) what += ", iteration " + std::to_string(position.second);
    bool other_host = false;
    const progress::Board* board = progress::board();
    const std::string why = board != nullptr ? board->diagnose(&other_host) : std::string();
    std::fprintf(stderr, "[rank %d %s] ridgeline: timed out after %.0f s: %s%s%s (see --timeout)\n",
                 rank_for_message(), host, m_seconds, what.c_str(), why.empty() ? "" : ": ",
                 why.c_str());
    std::fflush(stderr);
    // Every rank of this host is level: a rank of another host may see the missing one, and
    // this rank's exit makes the launcher end the job. Give that rank a moment to say so.
    if (other_host) std::this_thread::sleep_for(std::chrono::seconds(2));
    std::_Exit(124);
  }
}

} // namespace ridgeline
