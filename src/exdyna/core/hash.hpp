// exdyna's one FNV-1a and one SplitMix64: the checksums, fingerprints and seeded streams that
// must give the same bits on every platform and in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace exdyna::core {

inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ULL;

// One FNV-1a round: xor in `unit`, multiply by the prime. The standard hash feeds bytes; a caller
// that hashes wider words (models.cpp's dropout seed) feeds those, a variant that is still stable.
constexpr std::uint64_t fnv1a_round(std::uint64_t h, std::uint64_t unit) {
  return (h ^ unit) * kFnv1aPrime;
}

// 64-bit FNV-1a of the bytes, continuing from h (chain calls to hash several buffers as one).
inline std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h = kFnv1aOffset) {
  for (const std::byte b : bytes) h = fnv1a_round(h, static_cast<std::uint8_t>(b));
  return h;
}
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = kFnv1aOffset) {
  return fnv1a(std::span<const std::byte>(static_cast<const std::byte*>(data), n), h);
}

// SplitMix64's increment (2^64 / golden ratio) and finaliser: a bijective 64-bit mix with full
// avalanche, also used on its own to derive keys.
inline constexpr std::uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ULL;
constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// SplitMix64: a tiny portable generator, so seeded draws are identical on every platform.
struct SplitMix64 {
  std::uint64_t state;
  explicit constexpr SplitMix64(std::uint64_t s) : state(s) {}
  constexpr std::uint64_t next() { return splitmix64_mix(state += kSplitMixGamma); }
  // Uniform in [0, n) (the modulo bias is negligible for the sizes exdyna draws).
  constexpr std::uint64_t below(std::uint64_t n) { return next() % n; }
  // Uniform in [0, 1), 53 bits.
  constexpr double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1): never 0, for logarithms.
  constexpr double uniform_open() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
};

}  // namespace exdyna::core
