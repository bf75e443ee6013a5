#include "exdyna/core/half_float.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "exdyna/core/error.hpp"
#include "unit/expect_error.hpp"

using namespace exdyna;
using namespace exdyna::core;

namespace {
float fp16(float x) {
  return fp16_bits_to_float(float_to_fp16_bits(x));
}
float bf16(float x) {
  return bf16_bits_to_float(float_to_bf16_bits(x));
}
float bits(std::uint32_t u) {
  return std::bit_cast<float>(u);
}
}  // namespace

TEST(HalfFloat, Fp16KnownValues) {
  EXPECT_EQ(float_to_fp16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16_bits(0.5f), 0x3800);
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(float_to_fp16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_fp16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16_bits(6.103515625e-05f), 0x0400);  // smallest normal, 2^-14
  EXPECT_EQ(fp16_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16(0.1f), 0.0999755859375f);
  for (std::uint32_t h = 0; h < 0x7c00; ++h)  // every finite fp16 survives the round trip
    ASSERT_EQ(float_to_fp16_bits(fp16_bits_to_float(static_cast<std::uint16_t>(h))), h) << h;
}

TEST(HalfFloat, Fp16TiesGoToEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to the even 1. 1 + 3 * 2^-11: up to 1 + 2^-9.
  EXPECT_EQ(float_to_fp16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_fp16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above the tie rounds up.
  EXPECT_EQ(
      float_to_fp16_bits(bits(std::bit_cast<std::uint32_t>(1.0f + std::ldexp(1.0f, -11)) + 1)),
      0x3c01);
}

TEST(HalfFloat, Fp16OverflowInfNaN) {
  EXPECT_EQ(float_to_fp16_bits(65519.0f), 0x7bff);  // below the tie at 65520
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7c00);  // the tie rounds to even: Inf
  EXPECT_EQ(float_to_fp16_bits(1e6f), 0x7c00);
  EXPECT_EQ(float_to_fp16_bits(-1e30f), 0xfc00);
  EXPECT_EQ(float_to_fp16_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isinf(fp16_bits_to_float(0xfc00)) && fp16_bits_to_float(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(fp16_bits_to_float(0x7c01)));
}

TEST(HalfFloat, Fp16Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal
  EXPECT_EQ(float_to_fp16_bits(tiny), 0x0001);
  EXPECT_EQ(fp16_bits_to_float(0x0001), tiny);
  EXPECT_EQ(fp16_bits_to_float(0x03ff), 1023 * tiny);
  EXPECT_EQ(float_to_fp16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0: even
  EXPECT_EQ(float_to_fp16_bits(1.5f * std::ldexp(1.0f, -25)), 0x0001);
  EXPECT_EQ(float_to_fp16_bits(3 * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 tiny: tie to even 2
  EXPECT_EQ(float_to_fp16_bits(-std::ldexp(1.0f, -30)), 0x8000);     // underflow keeps the sign
  EXPECT_EQ(float_to_fp16_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(float_to_fp16_bits(1023.75f * tiny), 0x0400);
}

TEST(HalfFloat, Bf16KnownValuesTiesAndSpecials) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16(0.1f), 0.10009765625f);
  EXPECT_EQ(float_to_bf16_bits(bits(0x3f808000)), 0x3f80);  // tie: to even (down)
  EXPECT_EQ(float_to_bf16_bits(bits(0x3f818000)), 0x3f82);  // tie: to even (up)
  EXPECT_EQ(float_to_bf16_bits(bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to Inf
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(bf16(bits(0x7f800001))));  // a NaN whose payload is all low bits
  EXPECT_EQ(bf16(std::numeric_limits<float>::denorm_min()), 0.0f);
  EXPECT_EQ(bf16(bits(0x00018000)), bits(0x00020000));  // subnormals round like the rest
}

TEST(HalfFloat, RoundingErrorIsExactAndSmall) {
  for (float x : {0.1f, -3.14159f, 1e-3f, 12345.678f, 7e-6f, -2.5e-8f}) {
    for (auto f : {ValueFormat::kFp16, ValueFormat::kBf16}) {
      const float r = round_to_format(x, f);
      const float e = x - r;
      EXPECT_EQ(r + e, x) << x;  // the residual keeps exactly what was not sent
      EXPECT_EQ(round_to_format(r, f), r) << x;
    }
    EXPECT_LE(std::fabs(x - bf16(x)), std::fabs(x) * std::ldexp(1.0f, -8));
  }
  EXPECT_EQ(round_to_format(0.1f, ValueFormat::kFp32), 0.1f);
}

TEST(HalfFloat, AddBits16RoundsTheSum) {
  std::uint16_t acc[2] = {float_to_fp16_bits(1.0f), float_to_fp16_bits(2048.0f)};
  const std::uint16_t in[2] = {float_to_fp16_bits(0.25f), float_to_fp16_bits(1.0f)};
  add_bits16(acc, in, 2, ValueFormat::kFp16);
  EXPECT_EQ(fp16_bits_to_float(acc[0]), 1.25f);
  EXPECT_EQ(fp16_bits_to_float(acc[1]), 2048.0f);  // 2049 is a tie between 2048 and 2050
  std::uint16_t b = float_to_bf16_bits(256.0f);
  const std::uint16_t one = float_to_bf16_bits(1.0f);
  add_bits16(&b, &one, 1, ValueFormat::kBf16);
  EXPECT_EQ(bf16_bits_to_float(b), 256.0f);  // 257 is a tie: to even 256
}

TEST(HalfFloat, ParseNamesTheValue) {
  EXPECT_EQ(parse_value_format("bf16"), ValueFormat::kBf16);
  EXPECT_EQ(std::string(to_string(ValueFormat::kFp16)), "fp16");
  expect_error<InvalidArgument>([] { parse_value_format("fp8"); },
                                {"value format 'fp8' is not valid", "fp32", "fp16", "bf16"});
  expect_error<InvalidArgument>([] { to_bits16(1.0f, ValueFormat::kFp32); }, {"fp32"});
}
