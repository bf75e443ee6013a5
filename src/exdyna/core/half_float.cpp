#include "exdyna/core/half_float.hpp"

#include <bit>
#include <cmath>

#include "exdyna/core/enum_names.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::core {

namespace {
constexpr EnumNames<ValueFormat, 3> kValueFormatNames{
    {{ValueFormat::kFp32, "fp32"}, {ValueFormat::kFp16, "fp16"}, {ValueFormat::kBf16, "bf16"}}};

// Keeps the top bits of m, dropping `shift` low bits with round-to-nearest, ties to even. A carry
// out of the kept bits is wanted: it moves to the next binade (or to Inf) by itself.
std::uint32_t shift_round_even(std::uint32_t m, int shift) {
  const std::uint32_t kept = m >> shift;
  const std::uint32_t rem = m & ((std::uint32_t{1} << shift) - 1);
  const std::uint32_t half = std::uint32_t{1} << (shift - 1);
  return kept + ((rem > half || (rem == half && (kept & 1u))) ? 1u : 0u);
}
}  // namespace

const char* to_string(ValueFormat f) {
  return enum_to_string(kValueFormatNames, f);
}

ValueFormat parse_value_format(std::string_view s) {
  return enum_parse(kValueFormatNames, "value format", s);
}

std::uint16_t float_to_fp16_bits(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN, quiet
  const int e = static_cast<int>(a >> 23) - 127;                   // unbiased exponent (Inf: 128)
  if (e >= 16) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 2^16, or Inf
  const std::uint32_t mant = a & 0x7fffffu;
  if (e >= -14) {  // a normal fp16, before rounding (which may carry up to Inf)
    const std::uint32_t h = (static_cast<std::uint32_t>(e + 15) << 23 | mant);
    return static_cast<std::uint16_t>(sign | shift_round_even(h, 13));
  }
  // Subnormal fp16: h = x / 2^-24. Below 2^-25 it rounds to zero; 2^-25 itself is a tie to 0.
  if (e < -25) return sign;
  const std::uint32_t m = mant | 0x800000u;  // float32's float subnormals land here as e = -127
  return static_cast<std::uint16_t>(sign | shift_round_even(m, -(e + 1)));
}

float fp16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float32
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

std::uint16_t float_to_bf16_bits(float x) {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>(shift_round_even(u, 16));
}

float bf16_bits_to_float(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::uint16_t to_bits16(float x, ValueFormat f) {
  EXDYNA_CHECK_ARG(f != ValueFormat::kFp32, "to_bits16: fp32 is not a 16-bit value format");
  return f == ValueFormat::kFp16 ? float_to_fp16_bits(x) : float_to_bf16_bits(x);
}

float from_bits16(std::uint16_t h, ValueFormat f) {
  EXDYNA_CHECK_ARG(f != ValueFormat::kFp32, "from_bits16: fp32 is not a 16-bit value format");
  return f == ValueFormat::kFp16 ? fp16_bits_to_float(h) : bf16_bits_to_float(h);
}

void round_to_format(std::span<float> xs, ValueFormat f) {
  if (f == ValueFormat::kFp32) return;
  for (auto& x : xs) x = from_bits16(to_bits16(x, f), f);
}

void add_bits16(std::uint16_t* acc, const std::uint16_t* in, std::size_t n, ValueFormat f) {
  if (f == ValueFormat::kFp16) {
    for (std::size_t i = 0; i < n; ++i)
      acc[i] = float_to_fp16_bits(fp16_bits_to_float(acc[i]) + fp16_bits_to_float(in[i]));
  } else {
    EXDYNA_CHECK_ARG(f == ValueFormat::kBf16, "add_bits16: fp32 is not a 16-bit value format");
    for (std::size_t i = 0; i < n; ++i)
      acc[i] = float_to_bf16_bits(bf16_bits_to_float(acc[i]) + bf16_bits_to_float(in[i]));
  }
}

}  // namespace exdyna::core
