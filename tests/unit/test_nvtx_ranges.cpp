// NVTX as a profiler sees ridgeline's ranges (CUDA builds; no GPU needed): nothing reaches NVTX
// until the CUDA backend's switch is on, then every range arrives in domain "ridgeline", pushed
// and popped in pairs, also when an exception leaves the scope.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/ranges.hpp"
#include "tests/support/nvtx_capture.hpp"

namespace ridgeline {
namespace {

TEST(NvtxRanges, NothingBeforeEnableThenEveryRangeInPairs) {
  ASSERT_FALSE(ranges::nvtx_enabled());
  { const ranges::Scope before("before"); }
  EXPECT_FALSE(nvtx_capture::attached()) << "a range reached NVTX before it was enabled";
  EXPECT_TRUE(nvtx_capture::events().empty());

  ranges::enable_nvtx();
  ASSERT_TRUE(ranges::nvtx_enabled());
  ASSERT_TRUE(nvtx_capture::attached());
  try {
    const ranges::Scope iteration("none: iteration 0");
    const ranges::Scope op("qkv_gemm");
    throw std::runtime_error("kernel failed");
  } catch (const std::runtime_error&) {
  }
  const auto events = nvtx_capture::events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_TRUE(events[0].push);
  EXPECT_EQ(events[0].name, "none: iteration 0");
  EXPECT_TRUE(events[1].push);
  EXPECT_EQ(events[1].name, "qkv_gemm");
  EXPECT_FALSE(events[2].push);
  EXPECT_FALSE(events[3].push);
  for (const auto& e : events)
    EXPECT_EQ(e.domain, "ridgeline");
}

} // namespace
} // namespace ridgeline
