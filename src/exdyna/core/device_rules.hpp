// The per-element rules of the CUDA kernels (core/device_kernels.hpp and
// sparsifiers/exdyna/device_kernels.hpp) that every kernel shares: a float's bits and |v| with the
// sign bit cleared, as __host__ __device__ inline functions, so that the CPU tests check them
// against the CPU code they mirror. Plain C++ for g++ (the macro is empty there); nvcc marks them
// __host__ __device__. No CUDA header is needed. ExDyna's own rules (selection, the ladder, the
// cut, the blocks) are in sparsifiers/exdyna/device_rules.hpp.
//
// Every rule compares |x| (the sign bit cleared) with a float threshold, as the CPU kernels do:
// NaN never passes, and the integer arithmetic on the bits is the CPU's, step for step.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define EXDYNA_HD __host__ __device__ __forceinline__
#else
#define EXDYNA_HD inline
#endif

namespace exdyna::core::rules {

EXDYNA_HD std::uint32_t bits_of(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
#endif
}

EXDYNA_HD float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
#endif
}

// |v| with the sign bit cleared (std::fabs on the CPU: the same bits, NaN stays NaN).
EXDYNA_HD float abs_of(float v) {
  return float_of(bits_of(v) & 0x7fffffffu);
}

// core::max_abs folds the sign-cleared bits with an unsigned max.
EXDYNA_HD std::uint32_t abs_bits(float v) {
  return bits_of(v) & 0x7fffffffu;
}

}  // namespace exdyna::core::rules
