// SIGTERM and SIGINT (a Slurm time limit, Ctrl-C): a job that can stop between points (a sweep)
// finishes the point it is in, writes what it has (marked incomplete) and exits 128 + the
// signal's number; anything else, and a second signal, removes this process's temporary files
// and exits at once. No temporary file is left behind either way.
#pragma once

#include <string>

namespace ridgeline::stop {

/// Installs the handlers; `who` prefixes the one line the handler prints ("[rank 0 host]").
void install(const std::string& who);

/// The signal that asked this process to stop between points (0: none yet).
int requested();

/// While alive, the first SIGTERM or SIGINT is a request (requested()) that the loop honours
/// at its next point; the process is told so on stderr.
class BetweenPoints {
public:
  BetweenPoints();
  ~BetweenPoints();
  BetweenPoints(const BetweenPoints&) = delete;
  BetweenPoints& operator=(const BetweenPoints&) = delete;
};

/// The exit status of a job stopped by `signal`.
inline int exit_status(int signal) {
  return 128 + signal;
}

} // namespace ridgeline::stop
