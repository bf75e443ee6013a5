#include "exdyna/core/huge_pages.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

using namespace exdyna::core;

TEST(HugePages, ResizeHugeKeepsTheContentsAndValueInitialisesTheRest) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1000}, kHugePageMinBytes / 4 + 3}) {
    std::vector<std::uint32_t> v(100);
    std::iota(v.begin(), v.end(), 7u);
    resize_huge(v, n);
    ASSERT_EQ(v.size(), n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i < 100 ? 7 + i : 0u) << "n " << n;
  }
}

TEST(HugePages, ResizeHugeReallocatesOnlyWhenItMustGrow) {
  std::vector<float> v;
  resize_huge(v, kHugePageMinBytes / sizeof(float) * 2);
  const float* p = v.data();
  EXPECT_GE(v.capacity(), v.size());
  resize_huge(v, v.size() / 2);  // shrinking keeps the allocation (and its huge pages)
  resize_huge(v, v.size() * 2);  // back within capacity
  EXPECT_EQ(v.data(), p);
}

TEST(HugePages, AssignHugeFillsEveryElement) {
  std::vector<float> v(10, 3.0f);
  assign_huge(v, kHugePageMinBytes / sizeof(float) + 5, 0.5f);
  ASSERT_EQ(v.size(), kHugePageMinBytes / sizeof(float) + 5);
  for (float x : v) ASSERT_EQ(x, 0.5f);
  assign_huge(v, 4, -1.0f);
  EXPECT_EQ(v, std::vector<float>(4, -1.0f));
}

TEST(HugePages, AdviceOnAnyRangeIsHarmless) {
  std::vector<char> small(100);
  advise_huge_pages(small.data(), small.size());  // below the minimum: nothing
  advise_huge_pages(nullptr, kHugePageMinBytes);
  std::vector<char> big(kHugePageMinBytes + 12345, 'x');
  advise_huge_pages(big.data() + 1, big.size() - 1);  // unaligned, already touched
  for (char c : big) ASSERT_EQ(c, 'x');
}

TEST(HugePages, AGrowingBufferGrowsGeometricallyNotByWhatEachStepAdds) {
  // A list that grows by 1 % per step (hard threshold's while the residual fills) must not be
  // reallocated, copied and faulted in again at every step.
  std::vector<float> v;
  const std::size_t n = kHugePageMinBytes / sizeof(float) * 2;
  resize_huge(v, n);
  EXPECT_EQ(v.capacity(), n);  // the first allocation is what was asked for
  v[n - 1] = 5.0f;
  resize_huge(v, n + n / 100);
  EXPECT_GE(v.capacity(), n + n / 2);
  EXPECT_EQ(v[n - 1], 5.0f);
  const float* p = v.data();
  for (std::size_t step = 2; step <= 40; ++step) resize_huge(v, n + step * n / 100);
  EXPECT_EQ(v.data(), p);  // 1.4 n fits in the 1.5 n reserved at the first growth
  std::vector<float> w;
  reserve_huge(w, n);
  reserve_huge(w, 4 * n);  // a jump past 1.5x gets what it needs
  EXPECT_EQ(w.capacity(), 4 * n);
}
