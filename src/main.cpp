// ridgeline entry point: MPI up, parse, run the selected command; errors are printed once and
// end every rank with a non-zero status (MPI_Abort for failures that may strand other ranks).
#include <cstdio>
#include <iostream>

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments, so every rank reaches this; only rank 0 speaks. A
    // usage error exits 2 like every other bad input (--help and --version exit 0).
    const int code = mpi.rank() == 0 ? app.exit(e) : e.get_exit_code();
    return code == 0 ? 0 : 2;
  }
  ridgeline::CommandContext ctx{mpi, std::vector<std::string>(argv, argv + argc)};
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
