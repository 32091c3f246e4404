// Watchdog thread.
#include "core/watchdog.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"

namespace ridgeline {

Watchdog::Watchdog(double seconds, std::string what)
    : m_seconds(seconds), m_what(std::move(what)), m_thread([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_done = true;
  }
  m_cv.notify_all();
  m_thread.join();
}

void Watchdog::rearm(std::string what) {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_what = std::move(what);
    m_rearmed = true;
  }
  m_cv.notify_all();
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(m_mutex);
  for (;;) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(m_seconds);
    if (m_cv.wait_until(lock, deadline, [this] { return m_done || m_rearmed; })) {
      if (m_done) return;
      m_rearmed = false;
      continue;
    }
    std::fprintf(stderr, "[rank %d] ridgeline: timed out after %.0f s: %s (see --timeout)\n",
                 error_rank(), m_seconds, m_what.c_str());
    std::fflush(stderr);
    std::_Exit(124);
  }
}

}  // namespace ridgeline
