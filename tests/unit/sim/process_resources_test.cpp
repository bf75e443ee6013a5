// process_resources: this process's resident memory and open descriptors.
#include "exdyna/sim/process_resources.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>

namespace exdyna::sim {
namespace {

TEST(ProcessResources, ResidentMemoryFollowsTouchedPages) {
  const auto before = resident_bytes();
  ASSERT_GT(before, 0);
  constexpr std::size_t kBytes = 64u << 20;
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);  // touched, so resident
  const auto after = resident_bytes();
  EXPECT_GE(after - before, static_cast<std::int64_t>(kBytes) * 9 / 10);
  EXPECT_EQ(block[kBytes - 1], 1);
}

TEST(ProcessResources, OpenDescriptorsCountAnOpenedFile) {
  const auto before = open_descriptors();
  ASSERT_GE(before, 0);
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(open_descriptors(), before + 1);
  std::fclose(f);
  EXPECT_EQ(open_descriptors(), before);
}

}  // namespace
}  // namespace exdyna::sim
