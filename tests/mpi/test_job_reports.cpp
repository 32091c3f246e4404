// The end every measuring command shares (JobReports), under mpiexec -n 2 and 4: reporters write
// once each, in their order; outputs are checked against inputs and each other before anything
// runs; every rank returns rank 0's status, a wrong result outranking the files, a file moved to
// its fallback giving 4 and a file lost everywhere 1; a file every rank writes takes rank 0's
// path on all of them.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/reporters.hpp"
#include "core/error.hpp"
#include "core/mpi_session.hpp"
#include "tests/support/test_session.hpp"

namespace ridgeline {
namespace {

namespace fs = std::filesystem;

// A directory of rank 0's, the same path on every rank, removed at the end.
class SharedDir {
public:
  SharedDir() {
    std::string path;
    if (test_session().rank() == 0) {
      char name[] = "/tmp/ridgeline-job-reports-XXXXXX";
      path = mkdtemp(name);
    }
    m_path = broadcast_string(MPI_COMM_WORLD, path, 0);
  }
  ~SharedDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (test_session().rank() == 0) fs::remove_all(m_path);
  }
  std::string file(const std::string& name) const { return m_path + "/" + name; }

private:
  std::string m_path;
};

// A reporter that notes when it wrote, for the order of the writes.
class Recorder : public Reporter {
public:
  Recorder(std::vector<std::string>& log, std::string name) : m_log(log), m_name(std::move(name)) {}
  void write() override { m_log.push_back(m_name); }

private:
  std::vector<std::string>& m_log;
  std::string m_name;
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.good()) throw Error("cannot write " + path);
}

CommandContext context() {
  return {test_session(), {"test_job_reports"}, {}};
}

TEST(JobReports, EachReporterWritesOnceInItsOrder) {
  SharedDir dir;
  const CommandContext ctx = context();
  std::vector<std::string> log;
  Recorder first(log, "first"), second(log, "second");
  Hdf5Reporter file(ctx.mpi, dir.file("out.h5"), false, [&](const std::string& path) {
    log.push_back("file");
    write_text(path, "results");
    return std::string(" (one point)");
  });
  JobReports reports(ctx, {&first, &file, &second});
  EXPECT_TRUE(reports.file_problems().empty());
  testing::internal::CaptureStdout();
  const int status = reports.finish();
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 0);
  if (ctx.mpi.rank() == 0) {
    EXPECT_EQ(log, (std::vector<std::string>{"first", "file", "second"}));
    EXPECT_EQ(printed, "wrote " + dir.file("out.h5") + " (one point)\n");
    EXPECT_TRUE(fs::exists(dir.file("out.h5")));
  } else {
    // Rank 0 alone writes a file no rank shares, and alone speaks.
    EXPECT_EQ(log, (std::vector<std::string>{"first", "second"}));
    EXPECT_EQ(printed, "");
  }
}

TEST(JobReports, OutputsThatAreInputsOrEachOtherAreRefusedBeforeAnything) {
  SharedDir dir;
  const CommandContext ctx = context();
  if (ctx.mpi.rank() == 0) write_text(dir.file("roofs.h5"), "measured");
  MPI_Barrier(MPI_COMM_WORLD);
  Hdf5Reporter file(ctx.mpi, dir.file("roofs.h5"), false,
                    [](const std::string&) -> std::string { throw Error("never written"); });
  SummaryReporter summaries(ctx.mpi, dir.file("s.txt"), dir.file("s.txt"), "title");
  JobReports reports(ctx, {&file, &summaries});
  const std::vector<std::string> problems =
      reports.file_problems({{dir.file("roofs.h5"), "--roofs"}});
  if (ctx.mpi.rank() == 0) {
    ASSERT_EQ(problems.size(), 2u);
    EXPECT_NE(problems[0].find("--out"), std::string::npos);
    EXPECT_NE(problems[0].find("--roofs"), std::string::npos);
    EXPECT_NE(problems[1].find("--markdown"), std::string::npos);
    EXPECT_NE(problems[1].find("--json"), std::string::npos);
  } else {
    EXPECT_TRUE(problems.empty()); // rank 0 speaks for the job (reject_if_any)
  }
  // Nothing was written: the input is as it was.
  std::ifstream in(dir.file("roofs.h5"));
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "measured");
}

TEST(JobReports, AWrongResultOutranksTheFilesOnEveryRank) {
  SharedDir dir;
  const CommandContext ctx = context();
  Hdf5Reporter file(ctx.mpi, dir.file("out.h5"), false, [](const std::string& path) {
    write_text(path, "results");
    return std::string();
  });
  JobReports reports(ctx, {&file});
  testing::internal::CaptureStdout();
  const int status = reports.finish(3);
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 3);
}

TEST(JobReports, AFileMovedToItsFallbackGivesFourOnEveryRank) {
  SharedDir dir;
  const CommandContext ctx = context();
  const std::string missing = dir.file("no-such-dir/out.h5");
  const std::string fallback_dir = dir.file("fallback");
  if (ctx.mpi.rank() == 0) fs::create_directory(fallback_dir);
  setenv("TMPDIR", fallback_dir.c_str(), 1);
  std::string written;
  Hdf5Reporter file(ctx.mpi, missing, false, [&](const std::string& path) {
    write_text(path, "results");
    written = path;
    return std::string();
  });
  JobReports reports(ctx, {&file});
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int status = reports.finish();
  const std::string printed = testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  unsetenv("TMPDIR");
  EXPECT_EQ(status, kExitResultsMoved);
  if (ctx.mpi.rank() == 0) {
    EXPECT_TRUE(file.file().moved());
    EXPECT_EQ(written.rfind(fallback_dir + "/", 0), 0u) << written;
    EXPECT_EQ(printed, "wrote " + written + "\n");
  }
}

TEST(JobReports, AFileLostEverywhereGivesOneAndNoWroteLine) {
  SharedDir dir;
  const CommandContext ctx = context();
  const std::string cwd = fs::current_path();
  fs::current_path(dir.file("")); // the last fallback is the current directory
  setenv("TMPDIR", dir.file("no-such-dir").c_str(), 1);
  Hdf5Reporter file(ctx.mpi, dir.file("no-such-dir/out.h5"), false,
                    [](const std::string&) -> std::string { throw Error("disk full"); });
  JobReports reports(ctx, {&file});
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int status = reports.finish();
  const std::string printed = testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  unsetenv("TMPDIR");
  fs::current_path(cwd);
  EXPECT_EQ(status, 1);
  EXPECT_EQ(printed, "");
  if (ctx.mpi.rank() == 0) {
    EXPECT_TRUE(file.file().lost());
  }
}

TEST(JobReports, AFileEveryRankWritesTakesRankZerosPath) {
  SharedDir dir;
  const CommandContext ctx = context();
  std::string given;
  Hdf5Reporter file(ctx.mpi, dir.file("out.h5"), true, [&](const std::string& path) {
    given = path;
    MPI_Barrier(MPI_COMM_WORLD); // every rank takes part in each write
    return std::string();
  });
  JobReports reports(ctx, {&file});
  testing::internal::CaptureStdout();
  const int status = reports.finish();
  testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 0);
  EXPECT_EQ(given, dir.file("out.h5"));
  EXPECT_EQ(broadcast_string(MPI_COMM_WORLD, given, 0), given);
}

} // namespace
} // namespace ridgeline
