// core::ScratchBuffer: the capacity it was given, values kept between uses, reset drops the
// storage.
#include "exdyna/core/scratch_buffer.hpp"

#include <gtest/gtest.h>

#include <cstdint>

using exdyna::core::ScratchBuffer;

TEST(ScratchBuffer, HoldsItsCapacityAndKeepsWrittenValues) {
  ScratchBuffer<std::uint32_t> b(1u << 20);
  ASSERT_EQ(b.capacity(), 1u << 20);
  ASSERT_NE(b.data(), nullptr);
  // The last element is addressable: a partition of all n_g elements fits.
  b[(1u << 20) - 1] = 7;
  for (std::uint32_t i = 0; i < 1000; ++i) b[i] = i * 3;
  const auto* p = b.data();
  for (std::uint32_t i = 0; i < 1000; ++i) EXPECT_EQ(p[i], i * 3);
  EXPECT_EQ(b[(1u << 20) - 1], 7u);
}

TEST(ScratchBuffer, ResetReplacesTheStorage) {
  ScratchBuffer<float> b;
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  b.reset(16);
  EXPECT_EQ(b.capacity(), 16u);
  b[15] = 1.5f;
  EXPECT_EQ(b[15], 1.5f);
  b.reset(0);
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}
