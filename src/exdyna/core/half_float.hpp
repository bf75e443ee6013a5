// 16-bit floating-point value formats for the values a sparsifier sends (--values fp16|bf16):
// the one home of the rounding. IEEE 754 binary16 (fp16: 1 sign, 5 exponent, 10 mantissa bits)
// and bfloat16 (bf16: the top 16 bits of a float32, 8 exponent bits, 7 mantissa bits).
//
// Rounding is round-to-nearest, ties to even, as the hardware converts. fp16: values beyond the
// largest finite fp16 (65504) round to +-Inf exactly as IEEE prescribes (from 65520 up); values
// up to half the smallest subnormal round to signed zero; subnormals are kept. bf16 has float32's
// range, so only values within half an ulp of FLT_MAX round up to Inf. NaN stays NaN (quiet).
// An accumulated value overflowing fp16 is refused by its sender (sparse_exchange.cpp) rather
// than sent as Inf: error feedback could not keep acc - Inf.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace exdyna::core {

enum class ValueFormat { kFp32, kFp16, kBf16 };
const char* to_string(ValueFormat f);
ValueFormat parse_value_format(std::string_view s);  // "fp32" | "fp16" | "bf16"
// Bytes one value takes on the wire.
inline std::size_t value_bytes(ValueFormat f) {
  return f == ValueFormat::kFp32 ? 4 : 2;
}

std::uint16_t float_to_fp16_bits(float x);
float fp16_bits_to_float(std::uint16_t h);
std::uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(std::uint16_t h);

// Packs / unpacks with the format's rounding; kFp32 is not a 16-bit format (InvalidArgument).
std::uint16_t to_bits16(float x, ValueFormat f);
float from_bits16(std::uint16_t h, ValueFormat f);

// x rounded to the nearest value the format represents (identity for kFp32).
inline float round_to_format(float x, ValueFormat f) {
  return f == ValueFormat::kFp32 ? x : from_bits16(to_bits16(x, f), f);
}
// In place, element by element.
void round_to_format(std::span<float> xs, ValueFormat f);

// The reduction every engine applies to 16-bit words: acc[i] = round(acc[i] + in[i]), the sum
// taken in float32 (exact for two fp16 or bf16 values up to the final rounding) and rounded back
// to f. Commutative bit for bit, so the engines' in-place and out-of-place orders agree.
void add_bits16(std::uint16_t* acc, const std::uint16_t* in, std::size_t n, ValueFormat f);

}  // namespace exdyna::core
