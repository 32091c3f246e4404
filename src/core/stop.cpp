// Signal handlers of ridgeline::stop (see stop.hpp): async-signal-safe calls only.
#include "core/stop.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>

#include "core/files.hpp"

namespace ridgeline::stop {
namespace {

volatile sig_atomic_t g_requested = 0;
volatile sig_atomic_t g_between_points = 0;
char g_who[256] = "ridgeline";

void say(const char* text) {
  ssize_t ignored = ::write(STDERR_FILENO, g_who, std::strlen(g_who));
  ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

// When the first signal came (CLOCK_MONOTONIC seconds): a launcher that forwards the signal a
// job already received delivers it twice within moments, which is not "again".
volatile sig_atomic_t g_first_s = 0;
constexpr long kSameSignalSeconds = 3;

long now_s() {
  struct timespec t {};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long>(t.tv_sec);
}

void handle(int signal) {
  const char* name = signal == SIGINT ? "SIGINT" : "SIGTERM";
  if (g_between_points && g_requested != 0 && now_s() - g_first_s < kSameSignalSeconds) return;
  if (g_between_points && g_requested == 0) {
    g_requested = signal;
    g_first_s = static_cast<sig_atomic_t>(now_s());
    say(signal == SIGINT ? " ridgeline: SIGINT: stopping after this point (again to stop now)\n"
                         : " ridgeline: SIGTERM: stopping after this point (again to stop now)\n");
    return;
  }
  remove_temporaries();
  say(" ridgeline: stopped by ");
  ssize_t ignored = ::write(STDERR_FILENO, name, std::strlen(name));
  ignored = ::write(STDERR_FILENO, "\n", 1);
  (void)ignored;
  ::_exit(exit_status(signal));
}

} // namespace

void install(const std::string& who) {
  std::strncpy(g_who, who.c_str(), sizeof(g_who) - 1);
  struct sigaction action {};
  action.sa_handler = handle;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int requested() {
  return g_requested;
}

BetweenPoints::BetweenPoints() {
  g_between_points = 1;
}

BetweenPoints::~BetweenPoints() {
  g_between_points = 0;
}

} // namespace ridgeline::stop
