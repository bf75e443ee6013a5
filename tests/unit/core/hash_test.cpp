// core's FNV-1a and SplitMix64 against published values: checksums, fingerprints and every seeded
// stream (synthetic gradients, shuffles) depend on these exact bits.
#include "exdyna/core/hash.hpp"

#include <gtest/gtest.h>

#include <string_view>

using namespace exdyna::core;

namespace {

std::uint64_t fnv(std::string_view s) {
  return fnv1a(s.data(), s.size());
}

TEST(Hash, Fnv1aKnownVectors) {
  EXPECT_EQ(fnv(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv("foobar"), 0x85944171f73967e8ULL);
  // Chaining continues the hash: two pieces hash as their concatenation.
  EXPECT_EQ(fnv1a("bar", 3, fnv("foo")), fnv("foobar"));
}

TEST(Hash, SplitMix64KnownSequence) {
  // The first outputs of splitmix64 seeded with 0 (Vigna's reference implementation).
  SplitMix64 g(0);
  EXPECT_EQ(g.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(g.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(g.next(), 0x06c45d188009454fULL);
  SplitMix64 h(1234567);
  EXPECT_EQ(h.next(), 6457827717110365317ULL);
  EXPECT_EQ(h.next(), 3203168211198807973ULL);
}

TEST(Hash, SplitMix64DrawsStayInRange) {
  SplitMix64 g(42);
  for (int i = 0; i < 10000; ++i) {
    const double u = g.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    const double o = g.uniform_open();
    EXPECT_GT(o, 0.0);
    EXPECT_LT(o, 1.0);
    EXPECT_LT(g.below(7), 7u);
  }
}

}  // namespace
