// core::ByteWriter / ByteReader: round trip, and every short or long stream refused with the one
// error type, which callers may catch as DataError or as InvalidArgument.
#include "exdyna/core/byte_io.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "unit/expect_error.hpp"

using namespace exdyna;
using core::ByteReader;
using core::ByteStreamError;
using core::ByteWriter;

namespace {

std::vector<std::byte> sample() {
  static const std::vector<float> kList{1.f, -2.f, 3.5f};
  ByteWriter w;
  w.put<std::int32_t>(-7);
  w.put(2.5);
  w.put_list(std::span<const float>(kList));
  w.put_string("fingerprint");
  return w.take();
}

TEST(ByteIo, RoundTrip) {
  const auto bytes = sample();
  EXPECT_EQ(bytes.size(), 4u + 8u + 8u + 12u + 8u + 11u);
  ByteReader r(bytes, "sample");
  EXPECT_EQ(r.get<std::int32_t>(), -7);
  EXPECT_EQ(r.get<double>(), 2.5);
  EXPECT_EQ(r.get_list<float>(), (std::vector<float>{1.f, -2.f, 3.5f}));
  EXPECT_EQ(r.get_string(), "fingerprint");
  EXPECT_TRUE(r.done());
  r.expect_end();
}

TEST(ByteIo, EveryTruncationIsRefusedNamingTheStream) {
  const auto bytes = sample();
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    ByteReader r(std::span<const std::byte>(bytes.data(), cut), "sample state");
    expect_error<ByteStreamError>(
        [&] {
          r.get<std::int32_t>();
          r.get<double>();
          r.get_list<float>();
          r.get_string();
        },
        {"sample state", "truncated"});
  }
}

TEST(ByteIo, ErrorIsBothDataErrorAndInvalidArgument) {
  const std::vector<std::byte> three(3);
  ByteReader r(three, "x");
  EXPECT_THROW(r.get<std::int32_t>(), DataError);
  EXPECT_THROW(r.get<std::int32_t>(), InvalidArgument);
  EXPECT_THROW(r.get<std::int32_t>(), Error);
  expect_error<ByteStreamError>([&] { r.expect_end(); }, {"x has 3 bytes, expected 0"});
}

// A corrupt count must not overflow the length check into an out-of-bounds read.
TEST(ByteIo, HugeListCountIsRefused) {
  ByteWriter w;
  w.put(std::numeric_limits<std::uint64_t>::max() / 2);
  w.put<double>(1.0);
  const auto bytes = w.take();
  ByteReader r(bytes, "corrupt");
  expect_error<ByteStreamError>([&] { r.get_list<double>(); }, {"corrupt", "truncated"});
}

}  // namespace
