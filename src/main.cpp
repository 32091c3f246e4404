// ridgeline entry point: MPI up, parse, run the selected command; errors are printed once and
// end every rank with a non-zero status (MPI_Abort for failures that may strand other ranks).
// Exit codes (README, "Exit codes"): 0 success, 1 a runtime failure, 2 a usage error, 3 a
// failed check or gate, 124 a timeout.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  // Line-buffered even into a file or pipe: a job killed by its scheduler keeps every table
  // row it printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::cout.sync_with_stdio(true);
  ridgeline::MpiSession mpi(&argc, &argv);
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
