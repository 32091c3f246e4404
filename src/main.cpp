// ridgeline entry point: MPI up, parse, run the selected command; errors are printed once and
// end every rank with a non-zero status (MPI_Abort for failures that may strand other ranks).
// Exit codes (README, "Exit codes"): 0 success, 1 a runtime failure, 2 a usage error, 3 a
// failed check or gate, 124 a timeout.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "core/error.hpp"
#include "core/stop.hpp"
#include "core/watchdog.hpp"

namespace {

// --timeout as the command line gives it, before anything is parsed (reading a --config file
// can already hang): the default when it is absent or not a positive number, which the parser
// then refuses.
double timeout_in_argv(int argc, char** argv) {
  double seconds = ridgeline::kDefaultTimeoutSeconds;
  for (int i = 1; i < argc; ++i) {
    const char* value = nullptr;
    if (std::strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
      value = argv[i + 1];
    else if (std::strncmp(argv[i], "--timeout=", 10) == 0)
      value = argv[i] + 10;
    if (value == nullptr) continue;
    char* end = nullptr;
    const double v = std::strtod(value, &end);
    if (end != value && *end == '\0' && v > 0) seconds = v;
  }
  return seconds;
}

// The selected command's --timeout once parsed (a --config file may set it); commands without
// one (the readers) are not bounded after parsing: they refuse files that could block them.
double parsed_timeout(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands())
    if (const CLI::Option* option = command->get_option_no_throw("--timeout")) try {
        return option->as<double>();
      } catch (const CLI::Error&) {
      }
  return ridgeline::kNeverSeconds;
}

} // namespace

int main(int argc, char** argv) {
  // Line-buffered even into a file or pipe: a job killed by its scheduler keeps every table
  // row it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::cout.sync_with_stdio(true);
  // --timeout bounds the whole job, from here to MPI_Finalize: a rank stuck in MPI's start, in
  // reading its --config or in the first agreement names itself and ends the job (exit 124).
  ridgeline::Watchdog job_watchdog(timeout_in_argv(argc, argv),
                                   "starting: MPI, the command line and its --config files");
  ridgeline::MpiSession mpi(&argc, &argv);
  // SIGTERM / SIGINT: no temporary file left behind, a sweep keeps what it finished.
  ridgeline::stop::install("[rank " + std::to_string(mpi.rank()) + " " + mpi.hostname() + "]");
  CLI::App app{"ridgeline"};
  ridgeline::CommandAction action;
  ridgeline::build_cli(app, action);
  // Usage errors (an unknown option, a value an option refuses, a bad --config file, a bad
  // list) exit 2 on every rank, printed once on one line. Every rank parses the same arguments
  // and files, but a file may read differently on another node: the ranks agree first, and the
  // lowest rank that failed speaks.
  std::string usage_error;
  bool exit_now = false; // --help, --version
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      exit_now = true;
      if (mpi.rank() == 0) app.exit(e);
    } else {
      usage_error = ridgeline::usage_message(e, app);
      const std::vector<CLI::App*> selected = app.get_subcommands();
      const std::string command = selected.empty() ? "" : " " + selected.front()->get_name();
      usage_error += " (see ridgeline" + command + " --help)";
    }
  }
  int first_failed = usage_error.empty() ? mpi.size() : mpi.rank();
  MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, mpi.world());
  if (first_failed < mpi.size()) {
    if (mpi.rank() == first_failed)
      std::cerr << "ridgeline: "
                << (first_failed == 0 ? "" : "rank " + std::to_string(first_failed) + ": ")
                << usage_error << std::endl;
    return 2;
  }
  if (exit_now) return 0;
  job_watchdog.set_timeout(parsed_timeout(app));
  const std::vector<CLI::App*> selected = app.get_subcommands();
  job_watchdog.rearm("running ridgeline " + (selected.empty() ? "" : selected.front()->get_name()));
  ridgeline::CommandContext ctx{mpi, std::vector<std::string>(argv, argv + argc),
                                app.get_config_ptr()->results()};
  try {
    return action(ctx);
  } catch (const std::exception& e) {
    const int code = dynamic_cast<const ridgeline::UsageError*>(&e) ? 2 : 1;
    if (mpi.all_ranks_failed(3.0)) {
      if (mpi.rank() == 0) std::cerr << "ridgeline: " << e.what() << std::endl;
      return code;
    }
    std::cerr << "[rank " << mpi.rank() << " " << mpi.hostname() << "] ridgeline: " << e.what()
              << std::endl;
    mpi.abort(code);
  }
}
