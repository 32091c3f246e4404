// Host memory limits from fake /proc and cgroup trees and Slurm variables: the least of
// MemAvailable, the cgroup's headroom (v2 and v1, the process's cgroup and its ancestors) and
// Slurm's allocation, with the limit that bound it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/host_memory.hpp"

namespace ridgeline {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

class HostMemoryTest : public ::testing::Test {
protected:
  void SetUp() override {
    m_root = fs::temp_directory_path() /
             ("ridgeline-host-memory-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_root);
    fs::create_directories(m_root / "cgroup");
    m_sources.meminfo = (m_root / "meminfo").string();
    m_sources.self_cgroup = (m_root / "self_cgroup").string();
    m_sources.cgroup_root = (m_root / "cgroup").string();
    // 64 GiB available unless a test says otherwise.
    write("meminfo",
          "MemTotal:       131072000 kB\nMemFree:        1000 kB\nMemAvailable:   67108864 kB\n"
          "HugePages_Total:       0\n");
    write("self_cgroup", "0::/\n");
  }
  void TearDown() override { fs::remove_all(m_root); }

  void write(const fs::path& relative, const std::string& text) {
    fs::create_directories((m_root / relative).parent_path());
    std::ofstream(m_root / relative) << text;
  }

  fs::path m_root;
  MemorySources m_sources;
};

TEST_F(HostMemoryTest, MemAvailableAloneBindsOutsideAnyLimit) {
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, 64 * kGiB);
  EXPECT_EQ(m.bound_by, "MemAvailable");
}

TEST_F(HostMemoryTest, CgroupV2HeadroomOfTheTightestAncestor) {
  write("self_cgroup", "0::/slurm/job_7/step_0\n");
  write("cgroup/slurm/job_7/step_0/memory.max", "max\n");
  write("cgroup/slurm/job_7/step_0/memory.current", "1073741824\n");
  write("cgroup/slurm/job_7/memory.max", std::to_string(16 * kGiB) + "\n");
  write("cgroup/slurm/job_7/memory.current", std::to_string(4 * kGiB) + "\n");
  write("cgroup/slurm/memory.max", std::to_string(100 * kGiB) + "\n");
  write("cgroup/slurm/memory.current", std::to_string(10 * kGiB) + "\n");
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, 12 * kGiB); // the job's 16 GiB less the 4 GiB it uses
  EXPECT_EQ(m.bound_by, "cgroup v2 memory.max");
}

TEST_F(HostMemoryTest, CgroupV2InAContainerThatSeesOnlyItsOwnCgroup) {
  write("self_cgroup", "0::/kubepods/pod1/abc\n"); // not under the mount: the mount is its root
  write("cgroup/memory.max", std::to_string(8 * kGiB) + "\n");
  write("cgroup/memory.current", std::to_string(3 * kGiB) + "\n");
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, 5 * kGiB);
  EXPECT_EQ(m.bound_by, "cgroup v2 memory.max");
}

TEST_F(HostMemoryTest, CgroupV2UnderUnifiedOnHybridSystems) {
  write("self_cgroup", "1:cpu:/\n0::/user.slice\n");
  write("cgroup/unified/user.slice/memory.max", std::to_string(2 * kGiB) + "\n");
  write("cgroup/unified/user.slice/memory.current", std::to_string(kGiB / 2) + "\n");
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, kGiB + kGiB / 2);
  EXPECT_EQ(m.bound_by, "cgroup v2 memory.max");
}

TEST_F(HostMemoryTest, CgroupV1LimitAndUnlimitedSentinel) {
  write("self_cgroup", "5:cpuset:/\n4:memory:/docker/abc\n0::/\n");
  write("cgroup/memory/docker/abc/memory.limit_in_bytes", std::to_string(6 * kGiB) + "\n");
  write("cgroup/memory/docker/abc/memory.usage_in_bytes", std::to_string(2 * kGiB) + "\n");
  write("cgroup/memory/docker/memory.limit_in_bytes", "9223372036854771712\n"); // no limit
  write("cgroup/memory/docker/memory.usage_in_bytes", std::to_string(50 * kGiB) + "\n");
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, 4 * kGiB);
  EXPECT_EQ(m.bound_by, "cgroup v1 memory.limit_in_bytes");
}

TEST_F(HostMemoryTest, UsageAboveTheLimitLeavesNothing) {
  write("self_cgroup", "0::/\n");
  write("cgroup/memory.max", std::to_string(kGiB) + "\n");
  write("cgroup/memory.current", std::to_string(2 * kGiB) + "\n");
  EXPECT_EQ(host_memory(m_sources).bytes, 0);
}

TEST_F(HostMemoryTest, SlurmMemPerNode) {
  m_sources.env["SLURM_MEM_PER_NODE"] = "32000";
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, 32000 * kMiB);
  EXPECT_EQ(m.bound_by, "SLURM_MEM_PER_NODE");
  m_sources.env["SLURM_MEM_PER_NODE"] = "0"; // --mem=0: the whole node
  EXPECT_EQ(host_memory(m_sources).bound_by, "MemAvailable");
}

TEST_F(HostMemoryTest, SlurmMemPerCpuTimesCpusOnNode) {
  m_sources.env["SLURM_MEM_PER_CPU"] = "2G";
  m_sources.env["SLURM_CPUS_ON_NODE"] = "4";
  m_sources.env["SLURM_MEM_PER_NODE"] = "16000";
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, 8 * kGiB);
  EXPECT_EQ(m.bound_by, "SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE");
  m_sources.env.erase("SLURM_CPUS_ON_NODE"); // no CPU count: no product
  EXPECT_EQ(host_memory(m_sources).bound_by, "SLURM_MEM_PER_NODE");
}

TEST_F(HostMemoryTest, SlurmMemPerGpuTimesGpusOnNode) {
  m_sources.env["SLURM_MEM_PER_GPU"] = "10240";
  m_sources.env["SLURM_GPUS_ON_NODE"] = "2";
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, 20 * kGiB);
  EXPECT_EQ(m.bound_by, "SLURM_MEM_PER_GPU x SLURM_GPUS_ON_NODE");
}

TEST_F(HostMemoryTest, TheLeastOfAllLimitsBinds) {
  write("self_cgroup", "0::/job\n");
  write("cgroup/job/memory.max", std::to_string(10 * kGiB) + "\n");
  write("cgroup/job/memory.current", "0\n");
  m_sources.env["SLURM_MEM_PER_NODE"] = "12G";
  EXPECT_EQ(host_memory(m_sources).bound_by, "cgroup v2 memory.max");
  write("meminfo", "MemAvailable:   1048576 kB\n"); // 1 GiB left on the machine
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, kGiB);
  EXPECT_EQ(m.bound_by, "MemAvailable");
}

TEST_F(HostMemoryTest, NothingReadableIsUnknown) {
  m_sources.meminfo = (m_root / "missing").string();
  m_sources.self_cgroup = (m_root / "missing").string();
  const HostMemory m = host_memory(m_sources);
  EXPECT_EQ(m.bytes, -1);
  EXPECT_EQ(m.bound_by, "unknown");
}

TEST(SlurmMegabytes, UnitsAndRejects) {
  EXPECT_EQ(parse_slurm_megabytes("4096"), 4096 * kMiB);
  EXPECT_EQ(parse_slurm_megabytes("4096M"), 4096 * kMiB);
  EXPECT_EQ(parse_slurm_megabytes("16G"), 16 * kGiB);
  EXPECT_EQ(parse_slurm_megabytes("1T"), 1024 * kGiB);
  EXPECT_EQ(parse_slurm_megabytes("512K"), 512 * 1024);
  EXPECT_EQ(parse_slurm_megabytes(""), -1);
  EXPECT_EQ(parse_slurm_megabytes("lots"), -1);
  EXPECT_EQ(parse_slurm_megabytes("12Q"), -1);
}

} // namespace
} // namespace ridgeline
