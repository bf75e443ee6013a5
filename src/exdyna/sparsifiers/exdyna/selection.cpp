#include "exdyna/sparsifiers/exdyna/selection.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "exdyna/core/enum_names.hpp"
#include "exdyna/core/error.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace exdyna::sparsifiers {

std::size_t select_threshold_scalar(std::span<const float> part, float threshold,
                                    std::uint32_t offset, std::uint32_t* out) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < part.size(); ++i)
    if (std::fabs(part[i]) >= threshold) out[c++] = offset + static_cast<std::uint32_t>(i);
  return c;
}

namespace {

// Compress tables: entry m lists the set lanes of an 8-bit (or 4-bit) mask, lowest first, so a
// group's hits are written with one store and the count advanced by popcount(m), no branches.
// The store writes a full vector: entries past the count are scratch, inside part.size().
struct Lut8 {
  std::array<std::uint64_t, 256> lanes{};
  constexpr Lut8() {
    for (unsigned m = 0; m < 256; ++m) {
      std::uint64_t v = 0;
      unsigned k = 0;
      for (unsigned b = 0; b < 8; ++b)
        if (m & (1u << b)) v |= static_cast<std::uint64_t>(b) << (8 * k++);
      lanes[m] = v;
    }
  }
};
constexpr Lut8 kLut8;

std::size_t scalar_tail(const float* p, std::size_t i, std::size_t n, float threshold,
                        std::uint32_t offset, std::uint32_t* out, std::size_t c) {
  for (; i < n; ++i)
    if (std::fabs(p[i]) >= threshold) out[c++] = offset + static_cast<std::uint32_t>(i);
  return c;
}

#if defined(__SSE2__)
struct Lut4 {
  std::array<std::array<std::uint32_t, 4>, 16> lanes{};
  constexpr Lut4() {
    for (unsigned m = 0; m < 16; ++m) {
      unsigned k = 0;
      for (unsigned b = 0; b < 4; ++b)
        if (m & (1u << b)) lanes[m][k++] = b;
    }
  }
};
alignas(16) constexpr Lut4 kLut4;

// The lanes of a[0..4) that are >= thr, or-ed (a lane-mask vector). Not one compare of the
// lane-wise max: maxps returns its second operand when either is NaN, so in a max tree
// max(hit, NaN) = NaN and then max(NaN, x) = x lost a hit behind a NaN in the same lane of a later
// vector (the finding of tests/fuzz/ladder_cut_fuzz.cpp). Written out: as loops over arrays the
// compiler kept them in memory (1.6-3.4x slower in cache).
inline __m128 lanes_at_least(const __m128* a, __m128 thr) {
  return _mm_or_ps(_mm_or_ps(_mm_cmpge_ps(a[0], thr), _mm_cmpge_ps(a[1], thr)),
                   _mm_or_ps(_mm_cmpge_ps(a[2], thr), _mm_cmpge_ps(a[3], thr)));
}

// Baseline x86-64: 32 floats per iteration; a group with no lane at or above thr is skipped.
std::size_t select_sse2(const float* p, std::size_t n, float threshold, std::uint32_t offset,
                        std::uint32_t* out) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 thr = _mm_set1_ps(threshold);
  std::size_t c = 0, i = 0;
  for (; i + 32 <= n; i += 32) {
    __m128 a[8];
    for (int j = 0; j < 8; ++j) a[j] = _mm_and_ps(_mm_loadu_ps(p + i + 4 * j), abs_mask);
    if (_mm_movemask_ps(_mm_or_ps(lanes_at_least(a, thr), lanes_at_least(a + 4, thr))) == 0)
      continue;
    for (int j = 0; j < 8; ++j) {
      const unsigned mask = static_cast<unsigned>(_mm_movemask_ps(_mm_cmpge_ps(a[j], thr)));
      const __m128i base = _mm_set1_epi32(static_cast<int>(offset + i + 4 * j));
      const __m128i lanes =
          _mm_load_si128(reinterpret_cast<const __m128i*>(kLut4.lanes[mask].data()));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c), _mm_add_epi32(base, lanes));
      c += static_cast<std::size_t>(__builtin_popcount(mask));
    }
  }
  return scalar_tail(p, i, n, threshold, offset, out, c);
}

// AVX2 where the CPU has it (chosen at run time; the build stays baseline x86-64).
__attribute__((target("avx2"))) std::size_t select_avx2(const float* p, std::size_t n,
                                                        float threshold, std::uint32_t offset,
                                                        std::uint32_t* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 thr = _mm256_set1_ps(threshold);
  std::size_t c = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256 a[8];
    for (int j = 0; j < 8; ++j) a[j] = _mm256_and_ps(_mm256_loadu_ps(p + i + 8 * j), abs_mask);
    // The compares or-ed (a max tree lost a hit behind a NaN: lanes_at_least).
    unsigned masks[8], any = 0;
    for (int j = 0; j < 8; ++j)
      any |= masks[j] =
          static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a[j], thr, _CMP_GE_OQ)));
    if (any == 0) continue;
    for (int j = 0; j < 8; ++j) {
      const unsigned mask = masks[j];
      const __m256i base = _mm256_set1_epi32(static_cast<int>(offset + i + 8 * j));
      const __m256i lanes = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kLut8.lanes[mask])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c), _mm256_add_epi32(base, lanes));
      c += static_cast<std::size_t>(__builtin_popcount(mask));
    }
  }
  return scalar_tail(p, i, n, threshold, offset, out, c);
}

// AVX-512F: the mask registers and a register-destination compress write the hits without a
// table and without branches (a compress straight to memory is microcoded and slow on some CPUs,
// so the whole vector is stored and the count advanced by the mask's popcount).
__attribute__((target("avx512f"))) std::size_t select_avx512(const float* p, std::size_t n,
                                                             float threshold, std::uint32_t offset,
                                                             std::uint32_t* out) {
  const __m512 thr = _mm512_set1_ps(threshold);
  const __m512i step = _mm512_set1_epi32(16);
  __m512i idx =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(offset)),
                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  std::size_t c = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 a0 = _mm512_abs_ps(_mm512_loadu_ps(p + i));
    const __m512 a1 = _mm512_abs_ps(_mm512_loadu_ps(p + i + 16));
    const __m512 a2 = _mm512_abs_ps(_mm512_loadu_ps(p + i + 32));
    const __m512 a3 = _mm512_abs_ps(_mm512_loadu_ps(p + i + 48));
    const __mmask16 k0 = _mm512_cmp_ps_mask(a0, thr, _CMP_GE_OQ);
    const __mmask16 k1 = _mm512_cmp_ps_mask(a1, thr, _CMP_GE_OQ);
    const __mmask16 k2 = _mm512_cmp_ps_mask(a2, thr, _CMP_GE_OQ);
    const __mmask16 k3 = _mm512_cmp_ps_mask(a3, thr, _CMP_GE_OQ);
    if ((k0 | k1 | k2 | k3) == 0) {
      idx = _mm512_add_epi32(idx, _mm512_slli_epi32(step, 2));
      continue;
    }
    const __mmask16 ks[4] = {k0, k1, k2, k3};
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_si512(out + c, _mm512_maskz_compress_epi32(ks[j], idx));
      c += static_cast<std::size_t>(__builtin_popcount(ks[j]));
      idx = _mm512_add_epi32(idx, step);
    }
  }
  return scalar_tail(p, i, n, threshold, offset, out, c);
}

using Kernel = std::size_t (*)(const float*, std::size_t, float, std::uint32_t, std::uint32_t*);
#endif

std::size_t select_scalar_kernel(const float* p, std::size_t n, float threshold,
                                 std::uint32_t offset, std::uint32_t* out) {
  return scalar_tail(p, 0, n, threshold, offset, out, 0);
}

bool cpu_has(SelectKernel k) {
#if defined(__SSE2__)
  __builtin_cpu_init();
  switch (k) {
    case SelectKernel::kScalar:
    case SelectKernel::kSse2:
      return true;
    case SelectKernel::kAvx2:
      return __builtin_cpu_supports("avx2");
    case SelectKernel::kAvx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return k == SelectKernel::kScalar;
#endif
}

SelectKernel best_kernel() {
  for (auto k : {SelectKernel::kAvx512, SelectKernel::kAvx2, SelectKernel::kSse2})
    if (cpu_has(k)) return k;
  return SelectKernel::kScalar;
}

std::size_t run_kernel(SelectKernel k, const float* p, std::size_t n, float threshold,
                       std::uint32_t offset, std::uint32_t* out) {
  switch (k) {
#if defined(__SSE2__)
    case SelectKernel::kSse2:
      return select_sse2(p, n, threshold, offset, out);
    case SelectKernel::kAvx2:
      return select_avx2(p, n, threshold, offset, out);
    case SelectKernel::kAvx512:
      return select_avx512(p, n, threshold, offset, out);
#endif
    default:
      return select_scalar_kernel(p, n, threshold, offset, out);
  }
}

}  // namespace

constexpr core::EnumNames<SelectKernel, 4> kSelectKernelNames{{{SelectKernel::kScalar, "scalar"},
                                                               {SelectKernel::kSse2, "sse2"},
                                                               {SelectKernel::kAvx2, "avx2"},
                                                               {SelectKernel::kAvx512, "avx512"}}};

const char* to_string(SelectKernel k) {
  return core::enum_to_string(kSelectKernelNames, k);
}

bool select_kernel_available(SelectKernel k) {
  return cpu_has(k);
}

SelectKernel select_kernel_in_use() {
  static const SelectKernel k = best_kernel();
  return k;
}

std::size_t select_threshold_with(SelectKernel k, std::span<const float> part, float threshold,
                                  std::uint32_t offset, std::uint32_t* out) {
  EXDYNA_CHECK_ARG(cpu_has(k), "selection kernel ", to_string(k), " is not available on this CPU");
  return run_kernel(k, part.data(), part.size(), threshold, offset, out);
}

std::size_t select_threshold(std::span<const float> part, float threshold, std::uint32_t offset,
                             std::uint32_t* out) {
#if defined(__SSE2__)
  static const Kernel kernel = [] {
    switch (select_kernel_in_use()) {
      case SelectKernel::kAvx512:
        return static_cast<Kernel>(select_avx512);
      case SelectKernel::kAvx2:
        return static_cast<Kernel>(select_avx2);
      default:
        return static_cast<Kernel>(select_sse2);
    }
  }();
  return kernel(part.data(), part.size(), threshold, offset, out);
#else
  return scalar_tail(part.data(), 0, part.size(), threshold, offset, out, 0);
#endif
}

// ---- histogram ladder ----

std::uint32_t ladder_key(float v, int mant_bits) {
  return (std::bit_cast<std::uint32_t>(v) & 0x7fffffffu) >> (23 - mant_bits);
}

float ladder_value(std::uint32_t key, int mant_bits) {
  return std::bit_cast<float>(key << (23 - mant_bits));
}

float LadderGrid::value(int j) const {
  const std::int64_t key = static_cast<std::int64_t>(lo_key) + j;
  const std::int64_t inf_key = 0x7f800000 >> (23 - mant_bits);
  return ladder_value(static_cast<std::uint32_t>(key < inf_key ? key : inf_key), mant_bits);
}

std::size_t select_threshold_ladder_scalar(std::span<const float> part, float threshold,
                                           std::uint32_t offset, std::uint32_t* out,
                                           const LadderGrid& grid, std::int64_t* bins) {
  const float lo = grid.value(0);
  const std::uint32_t top = static_cast<std::uint32_t>(grid.rungs - 1);
  std::size_t c = 0;
  for (std::size_t i = 0; i < part.size(); ++i) {
    const float a = std::fabs(part[i]);
    if (a >= lo) {
      const std::uint32_t b = ladder_key(a, grid.mant_bits) - grid.lo_key;
      ++bins[b < top ? b : top];
    }
    if (a >= threshold) out[c++] = offset + static_cast<std::uint32_t>(i);
  }
  return c;
}

namespace {

void check_grid(const LadderGrid& grid) {
  EXDYNA_CHECK_ARG(
      grid.rungs >= 2 && grid.rungs <= 257 && grid.mant_bits >= 0 && grid.mant_bits <= 10,
      "ladder of ", grid.rungs, " rungs with ", grid.mant_bits,
      " mantissa bits is not valid; expected 2..257 rungs and 0..10 bits");
}

// The second pass: bins of the compacted |x|, all >= rung 0. Four interleaved 32-bit copies of
// the bins, so that runs of equal keys do not serialise on one counter; on the stack (at most
// 257 rungs, 4 KiB, of which only the 4 R in use are cleared), so the per-step path does not
// allocate. 32 bits suffice: a partition holds fewer than 2^32 elements.
void count_bins(const float* abs, std::size_t count, const LadderGrid& grid, std::int64_t* bins) {
  constexpr std::size_t kMax = 257;
  const std::size_t nb = static_cast<std::size_t>(grid.rungs);
  std::array<std::uint32_t, 4 * kMax> c;
  std::fill_n(c.begin(), 4 * nb, 0u);
  const std::uint32_t top = static_cast<std::uint32_t>(grid.rungs - 1);
  const int shift = 23 - grid.mant_bits;
  const std::uint32_t lo_key = grid.lo_key;
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4)
    for (std::size_t q = 0; q < 4; ++q) {
      const std::uint32_t b = (std::bit_cast<std::uint32_t>(abs[i + q]) >> shift) - lo_key;
      ++c[q * nb + (b < top ? b : top)];
    }
  for (; i < count; ++i) {
    const std::uint32_t b = (std::bit_cast<std::uint32_t>(abs[i]) >> shift) - lo_key;
    ++c[b < top ? b : top];
  }
  for (std::size_t j = 0; j < nb; ++j) bins[j] += c[j] + c[nb + j] + c[2 * nb + j] + c[3 * nb + j];
}

std::size_t collect_tail(const float* p, std::size_t i, std::size_t n, float lo,
                         std::uint32_t offset, std::uint32_t* idx_out, float* abs_out,
                         std::size_t c) {
  for (; i < n; ++i) {
    const float a = std::fabs(p[i]);
    idx_out[c] = offset + static_cast<std::uint32_t>(i);
    abs_out[c] = a;
    c += a >= lo;  // branch-free: the store is scratch when it does not count
  }
  return c;
}

#if defined(__SSE2__)
// GCC's AVX-512 headers build unmasked ops from an "undefined" vector and then warn about it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// |p[0..64)| as 4 vectors and their masks of |x| >= lo; whether any lane is set (the ladder
// kernels skip a group of 64 values below the lowest rung with this one test).
__attribute__((target("avx512f"), always_inline)) inline bool abs_at_least_64(const float* p,
                                                                              __m512 lo,
                                                                              __m512 a[4],
                                                                              __mmask16 k[4]) {
  for (int j = 0; j < 4; ++j) {
    a[j] = _mm512_abs_ps(_mm512_loadu_ps(p + 16 * j));
    k[j] = _mm512_cmp_ps_mask(a[j], lo, _CMP_GE_OQ);
  }
  return (k[0] | k[1] | k[2] | k[3]) != 0;
}
#pragma GCC diagnostic pop
#endif

#if defined(__SSE2__)
// GCC's AVX-512 headers build unmasked ops from an "undefined" vector and then warn about it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) std::size_t collect_avx512(const float* p, std::size_t n,
                                                              float lo_value, std::uint32_t offset,
                                                              std::uint32_t* idx_out,
                                                              float* abs_out) {
  const __m512 lo = _mm512_set1_ps(lo_value);
  const __m512i step = _mm512_set1_epi32(16);
  __m512i idx =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(offset)),
                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  std::size_t c = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 a[4];
    __mmask16 k[4];
    if (!abs_at_least_64(p + i, lo, a, k)) {
      idx = _mm512_add_epi32(idx, _mm512_slli_epi32(step, 2));
      continue;
    }
    for (int j = 0; j < 4; ++j) {
      _mm512_storeu_si512(idx_out + c, _mm512_maskz_compress_epi32(k[j], idx));
      _mm512_storeu_ps(abs_out + c, _mm512_maskz_compress_ps(k[j], a[j]));
      c += static_cast<std::size_t>(__builtin_popcount(k[j]));
      idx = _mm512_add_epi32(idx, step);
    }
  }
  return collect_tail(p, i, n, lo_value, offset, idx_out, abs_out, c);
}

// The exact controller's one-pass collection with one store per 16
// values instead of two. Each candidate is written as one word, its position in the partition
// shifted left by 8 bits, its bin (clamped to the top rung, R <= 256) in the low byte
// (kMaxWordPart bounds the position). The bins are then counted from the words' low bytes (no
// shift, subtract or clamp), and the words expanded to indices and |x| (expand_words_avx512) only
// as far as needed: all of them for collect_ladder_candidates, those at or above a worker's cut
// for take_cut_words. In the in-cache benchmark (d = 0.01: 3 of 4 groups of 64 hold a candidate)
// this takes 10-20 % off the pass, not half: the stores are not what bounds it.
constexpr std::size_t kMaxWordPart = std::size_t{1} << 24;

// The pass itself does no bin arithmetic. Each candidate is first stored as
// the bits of |x| with the low bits replaced by its position in its block (one ternary-logic op
// per vector, against a shift, a subtract, a clamp and an or). The compacted words (a few % of the
// values) are then turned into the words above, position << 8 | bin, in a tight loop per block,
// and each one's sub-bin (the 8 bits of |x| below its bin, take_cut's sub-bins) written beside
// it. Blocks of 2^b values with b = min(12, 15 - m), so the word keeps every bit from the
// sub-bin's lowest (bit 15 - m) up and the sub-bin comes from the word itself, with no gather
// from the partition.
inline int word_position_bits(const LadderGrid& grid) {
  return std::min(12, 15 - grid.mant_bits);
}

// The words of one block (its first value at `base`) as position << 8 | bin, and (subs, optional)
// each one's sub-bin, from the words' own bits.
__attribute__((target("avx512f"))) void words_from_high_bits(std::uint32_t* w, std::size_t count,
                                                             std::uint32_t base,
                                                             const LadderGrid& grid,
                                                             std::uint8_t* subs) {
  const __m128i sh = _mm_cvtsi32_si128(23 - grid.mant_bits);
  const __m128i sub_sh = _mm_cvtsi32_si128(15 - grid.mant_bits);
  const __m512i lo_key = _mm512_set1_epi32(static_cast<int>(grid.lo_key));
  const auto top = static_cast<std::uint32_t>(grid.rungs - 1);
  const __m512i top_v = _mm512_set1_epi32(static_cast<int>(top));
  const std::uint32_t low = (1u << word_position_bits(grid)) - 1;
  const __m512i low_v = _mm512_set1_epi32(static_cast<int>(low));
  const __m512i base_v = _mm512_set1_epi32(static_cast<int>(base));
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i x = _mm512_loadu_si512(w + i);
    const __m512i bin = _mm512_min_epu32(_mm512_sub_epi32(_mm512_srl_epi32(x, sh), lo_key), top_v);
    const __m512i pos = _mm512_add_epi32(_mm512_and_si512(x, low_v), base_v);
    _mm512_storeu_si512(w + i, _mm512_or_si512(_mm512_slli_epi32(pos, 8), bin));
    if (subs != nullptr)  // (vpmovdb keeps the low 8 bits: the sub-bin)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(subs + i),
                       _mm512_cvtepi32_epi8(_mm512_srl_epi32(x, sub_sh)));
  }
  for (; i < count; ++i) {
    const std::uint32_t b = (w[i] >> (23 - grid.mant_bits)) - grid.lo_key;
    if (subs != nullptr) subs[i] = static_cast<std::uint8_t>(w[i] >> (15 - grid.mant_bits));
    w[i] = ((w[i] & low) + base) << 8 | (b < top ? b : top);
  }
}

__attribute__((target("avx512f"))) std::size_t collect_words_avx512(const float* p, std::size_t n,
                                                                    const LadderGrid& grid,
                                                                    std::uint32_t* words,
                                                                    std::uint8_t* subs = nullptr) {
  const float lo_value = grid.value(0);
  const __m512 lo = _mm512_set1_ps(lo_value);
  const std::size_t block = std::size_t{1} << word_position_bits(grid);
  const auto high_bits = ~static_cast<std::uint32_t>(block - 1);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(high_bits));
  const __m512i step = _mm512_set1_epi32(16);
  const __m512i group_step = _mm512_set1_epi32(64);
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::size_t c = 0;
  for (std::size_t b0 = 0; b0 < n; b0 += block) {
    const std::size_t first = c, end = std::min(n, b0 + block);
    __m512i pos = lanes;  // in the block
    std::size_t i = b0;
    for (; i + 64 <= end; i += 64) {
      __m512 a[4];
      __mmask16 k[4];
      if (!abs_at_least_64(p + i, lo, a, k)) {
        pos = _mm512_add_epi32(pos, group_step);
        continue;
      }
      for (int j = 0; j < 4; ++j) {
        // (bits & high) | pos; c <= i + 16 j: the 16 words stay inside the n of words.
        const __m512i word = _mm512_ternarylogic_epi32(_mm512_castps_si512(a[j]), high, pos, 0xEA);
        _mm512_storeu_si512(words + c, _mm512_maskz_compress_epi32(k[j], word));
        c += static_cast<std::size_t>(__builtin_popcount(k[j]));
        pos = _mm512_add_epi32(pos, step);
      }
    }
    for (; i < end; ++i) {  // the partition's last values (a block is a whole number of groups)
      const float a = std::fabs(p[i]);
      words[c] = (std::bit_cast<std::uint32_t>(a) & high_bits) | static_cast<std::uint32_t>(i - b0);
      c += a >= lo_value;  // branch-free: the word is scratch when it does not count
    }
    words_from_high_bits(words + first, c - first, static_cast<std::uint32_t>(b0), grid,
                         subs == nullptr ? nullptr : subs + first);
  }
  return c;
}

// The words of collect_words_avx512, in place, to offset + position in idx, and |p[position]|
// into abs_out (gathered: the partition was just read, and the positions ascend).
__attribute__((target("avx512f"))) void expand_words_avx512(const float* p, std::size_t count,
                                                            std::uint32_t offset,
                                                            std::uint32_t* idx, float* abs_out) {
  const __m512i off = _mm512_set1_epi32(static_cast<int>(offset));
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i pos = _mm512_srli_epi32(_mm512_loadu_si512(idx + i), 8);
    _mm512_storeu_ps(abs_out + i, _mm512_abs_ps(_mm512_i32gather_ps(pos, p, 4)));
    _mm512_storeu_si512(idx + i, _mm512_add_epi32(pos, off));
  }
  for (; i < count; ++i) {
    const std::uint32_t pos = idx[i] >> 8;
    abs_out[i] = std::fabs(p[pos]);
    idx[i] = offset + pos;
  }
}

#pragma GCC diagnostic pop

// AVX2: the 8-bit mask of a group picks a lane permutation from kLut8 that moves the set lanes to
// the front; indices and values are permuted alike and stored whole.
__attribute__((target("avx2"))) std::size_t collect_avx2(const float* p, std::size_t n,
                                                         float lo_value, std::uint32_t offset,
                                                         std::uint32_t* idx_out, float* abs_out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 lo = _mm256_set1_ps(lo_value);
  std::size_t c = 0, i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 a[4];
    unsigned m[4];
    for (int j = 0; j < 4; ++j) {
      a[j] = _mm256_and_ps(_mm256_loadu_ps(p + i + 8 * j), abs_mask);
      m[j] = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a[j], lo, _CMP_GE_OQ)));
    }
    if ((m[0] | m[1] | m[2] | m[3]) == 0) continue;
    for (int j = 0; j < 4; ++j) {
      const __m256i lanes = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kLut8.lanes[m[j]])));
      const __m256i base = _mm256_set1_epi32(static_cast<int>(offset + i + 8 * j));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx_out + c), _mm256_add_epi32(base, lanes));
      _mm256_storeu_ps(abs_out + c, _mm256_permutevar8x32_ps(a[j], lanes));
      c += static_cast<std::size_t>(__builtin_popcount(m[j]));
    }
  }
  return collect_tail(p, i, n, lo_value, offset, idx_out, abs_out, c);
}

// Whether any of p[0..16) has |x| >= lo (NaN never; lanes_at_least).
inline bool any_at_least_16(const float* p, __m128 abs_mask, __m128 lo) {
  const __m128 a[4] = {
      _mm_and_ps(_mm_loadu_ps(p), abs_mask), _mm_and_ps(_mm_loadu_ps(p + 4), abs_mask),
      _mm_and_ps(_mm_loadu_ps(p + 8), abs_mask), _mm_and_ps(_mm_loadu_ps(p + 12), abs_mask)};
  return _mm_movemask_ps(lanes_at_least(a, lo)) != 0;
}

// Baseline x86-64: groups of 16 below rung 0 are skipped (any_at_least_16), the rest go through
// the branch-free scalar loop.
std::size_t collect_sse2(const float* p, std::size_t n, float lo_value, std::uint32_t offset,
                         std::uint32_t* idx_out, float* abs_out) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 lo = _mm_set1_ps(lo_value);
  std::size_t c = 0, i = 0;
  for (; i + 16 <= n; i += 16) {
    if (!any_at_least_16(p + i, abs_mask, lo)) continue;
    c = collect_tail(p, i, i + 16, lo_value, offset, idx_out, abs_out, c);
  }
  return collect_tail(p, i, n, lo_value, offset, idx_out, abs_out, c);
}
#endif

// ---- the counting pass (count_ladder_candidates) ----

// The bins of values with |x| >= lo, one element at a time and branch-free: a value below lo (or
// NaN) counts in a spare slot past the R bins. Four interleaved copies, as in count_bins, on the
// stack; only the 4 (R + 1) in use are cleared.
class PortableCounts {
 public:
  PortableCounts(float lo, const LadderGrid& grid)
      : lo_(lo),
        lo_key_(grid.lo_key),
        shift_(23 - grid.mant_bits),
        top_(static_cast<std::uint32_t>(grid.rungs - 1)),
        nb_(static_cast<std::size_t>(grid.rungs) + 1) {
    std::fill_n(c_.begin(), 4 * nb_, 0u);
  }
  void add(const float* p, std::size_t i, std::size_t n) {
    for (; i < n; ++i, q_ = (q_ + 1) & 3) {
      const float a = std::fabs(p[i]);
      const std::uint32_t b = (std::bit_cast<std::uint32_t>(a) >> shift_) - lo_key_;
      ++c_[q_ * nb_ + (a >= lo_ ? (b < top_ ? b : top_) : top_ + 1)];
    }
  }
  // Adds the bins into bins (R entries) and returns how many values they hold.
  std::size_t finish(std::int64_t* bins) const {
    std::size_t total = 0;
    for (std::size_t j = 0; j + 1 < nb_; ++j) {
      const std::uint32_t s = c_[j] + c_[nb_ + j] + c_[2 * nb_ + j] + c_[3 * nb_ + j];
      bins[j] += s;
      total += s;
    }
    return total;
  }

 private:
  float lo_;
  std::uint32_t lo_key_;
  int shift_;
  std::uint32_t top_;
  std::size_t nb_;
  std::size_t q_ = 0;
  std::array<std::uint32_t, 4 * 258> c_;
};

#if defined(__SSE2__)
// Baseline x86-64 (and AVX2): groups of 16 below lo are skipped (any_at_least_16), the rest are
// counted one at a time (PortableCounts).
std::size_t count_sse2(const float* p, std::size_t n, float lo_value, const LadderGrid& grid,
                       std::int64_t* bins) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  const __m128 lo = _mm_set1_ps(lo_value);
  PortableCounts counts(lo_value, grid);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if (!any_at_least_16(p + i, abs_mask, lo)) continue;
    counts.add(p, i, i + 16);
  }
  counts.add(p, i, n);
  return counts.finish(bins);
}

// AVX-512: the bin of each candidate (key - lo_key, clamped to the top rung: R <= 256 fits a
// byte) compressed to the front and narrowed to bytes, 16 bytes stored per vector of 16: an
// eighth of the bytes collect_avx512 writes (an index and a value per candidate), and the tight
// count over the bytes afterwards needs no shift, subtract or clamp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) std::size_t count_avx512(const float* p, std::size_t n,
                                                            float lo_value, const LadderGrid& grid,
                                                            std::uint8_t* out,
                                                            std::uint8_t* group_max) {
  const __m512 lo = _mm512_set1_ps(lo_value);
  const int shift = 23 - grid.mant_bits;
  const __m128i sh = _mm_cvtsi32_si128(shift);
  const __m512i lo_key = _mm512_set1_epi32(static_cast<int>(grid.lo_key));
  const auto top = static_cast<std::uint32_t>(grid.rungs - 1);
  const __m512i top_v = _mm512_set1_epi32(static_cast<int>(top));
  const __m512i one = _mm512_set1_epi32(1);
  std::size_t c = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512 a[4];
    __mmask16 k[4];
    if (!abs_at_least_64(p + i, lo, a, k)) {
      if (group_max) group_max[i / 64] = 0;
      continue;
    }
    __m512i top_bin = _mm512_setzero_si512();  // 1 + the group's highest bin
    for (int j = 0; j < 4; ++j) {
      const __m512i key = _mm512_srl_epi32(_mm512_castps_si512(a[j]), sh);
      const __m512i b = _mm512_min_epu32(_mm512_sub_epi32(key, lo_key), top_v);
      // c <= i + 16 j: the 16 bytes stay inside the n bytes of out.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c),
                       _mm512_cvtepi32_epi8(_mm512_maskz_compress_epi32(k[j], b)));
      c += static_cast<std::size_t>(__builtin_popcount(k[j]));
      top_bin = _mm512_mask_max_epu32(top_bin, k[j], top_bin, _mm512_add_epi32(b, one));
    }
    if (group_max)
      group_max[i / 64] =
          static_cast<std::uint8_t>(std::min(255u, _mm512_reduce_max_epu32(top_bin)));
  }
  for (; i < n; ++i) {
    const float a = std::fabs(p[i]);
    const std::uint32_t b = (std::bit_cast<std::uint32_t>(a) >> shift) - grid.lo_key;
    out[c] = static_cast<std::uint8_t>(b < top ? b : top);
    c += a >= lo_value;  // branch-free: the byte is scratch when it does not count
  }
  return c;
}

// collect_avx512 over the groups of 64 whose group_max is above `above` only (the bitmask of a
// vector of 64 map bytes is walked bit by bit: one branch per such vector, not one per group, so
// groups that hold the cut in no pattern cost no mispredictions each), then the tail.
__attribute__((target("avx512f,avx512bw"))) std::size_t collect_mapped_avx512(
    const float* p, std::size_t n, float lo_value, std::uint32_t offset,
    const std::uint8_t* group_max, unsigned above, std::uint32_t* idx_out, float* abs_out) {
  const __m512 lo = _mm512_set1_ps(lo_value);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  const __m512i above_v = _mm512_set1_epi8(static_cast<char>(above));
  const std::size_t groups = n / 64;
  std::size_t c = 0;
  for (std::size_t g0 = 0; g0 < groups; g0 += 64) {
    std::uint64_t m = 0;
    if (g0 + 64 <= groups) {
      m = _mm512_cmpgt_epu8_mask(_mm512_loadu_si512(group_max + g0), above_v);
    } else {
      for (std::size_t g = g0; g < groups; ++g)
        m |= static_cast<std::uint64_t>(group_max[g] > above) << (g - g0);
    }
    for (; m != 0; m &= m - 1) {
      const std::size_t i = 64 * (g0 + static_cast<std::size_t>(__builtin_ctzll(m)));
      __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(offset + i)), lane);
      for (int j = 0; j < 4; ++j) {
        const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(p + i + 16 * j));
        const __mmask16 k = _mm512_cmp_ps_mask(a, lo, _CMP_GE_OQ);
        // c <= i + 16 j (only values before this vector were kept): inside part.size().
        _mm512_storeu_si512(idx_out + c, _mm512_maskz_compress_epi32(k, idx));
        _mm512_storeu_ps(abs_out + c, _mm512_maskz_compress_ps(k, a));
        c += static_cast<std::size_t>(__builtin_popcount(k));
        idx = _mm512_add_epi32(idx, step);
      }
    }
  }
  return collect_tail(p, 64 * groups, n, lo_value, offset, idx_out, abs_out, c);
}
#pragma GCC diagnostic pop
#endif

// The bytes count_avx512 wrote, into bins (R <= 256 entries): four interleaved copies of the
// counters, as in count_bins (eight were no faster on the LSTM's 100,000 candidates and cost
// twice the clearing and summing on the small partitions of 16 workers).
void count_bin_bytes(const std::uint8_t* b, std::size_t count, int rungs, std::int64_t* bins) {
  constexpr std::size_t kCopies = 4;
  const auto nb = static_cast<std::size_t>(rungs);
  std::array<std::uint32_t, kCopies * 256> c;
  std::fill_n(c.begin(), kCopies * nb, 0u);
  std::size_t i = 0;
  for (; i + kCopies <= count; i += kCopies) {
    std::uint32_t w;
    std::memcpy(&w, b + i, kCopies);
    for (std::size_t q = 0; q < kCopies; ++q) ++c[q * nb + ((w >> (8 * q)) & 0xff)];
  }
  for (; i < count; ++i) ++c[b[i]];
  for (std::size_t j = 0; j < nb; ++j) bins[j] += c[j] + c[nb + j] + c[2 * nb + j] + c[3 * nb + j];
}

// The same for the words of collect_words_avx512: the bin is each word's low byte.
void count_word_bins(const std::uint32_t* w, std::size_t count, int rungs, std::int64_t* bins) {
  constexpr std::size_t kCopies = 4;
  const auto nb = static_cast<std::size_t>(rungs);
  std::array<std::uint32_t, kCopies * 256> c;
  std::fill_n(c.begin(), kCopies * nb, 0u);
  std::size_t i = 0;
  for (; i + kCopies <= count; i += kCopies)
    for (std::size_t q = 0; q < kCopies; ++q) ++c[q * nb + (w[i + q] & 0xff)];
  for (; i < count; ++i) ++c[w[i] & 0xff];
  for (std::size_t j = 0; j < nb; ++j) bins[j] += c[j] + c[nb + j] + c[2 * nb + j] + c[3 * nb + j];
}

// The collection kernel k (checked by the caller): every |x| >= lo of p[0, n).
std::size_t collect_run(SelectKernel k, const float* p, std::size_t n, float lo,
                        std::uint32_t offset, std::uint32_t* idx_out, float* abs_out) {
  switch (k) {
#if defined(__SSE2__)
    case SelectKernel::kAvx512:
      return collect_avx512(p, n, lo, offset, idx_out, abs_out);
    case SelectKernel::kAvx2:
      return collect_avx2(p, n, lo, offset, idx_out, abs_out);
    case SelectKernel::kSse2:
      return collect_sse2(p, n, lo, offset, idx_out, abs_out);
#endif
    default:
      return collect_tail(p, 0, n, lo, offset, idx_out, abs_out, 0);
  }
}

}  // namespace

std::size_t collect_ladder_candidates_with(SelectKernel k, std::span<const float> part,
                                           std::uint32_t offset, const LadderGrid& grid,
                                           std::uint32_t* idx_out, float* abs_out,
                                           std::int64_t* bins) {
  check_grid(grid);
  EXDYNA_CHECK_ARG(cpu_has(k), "selection kernel ", to_string(k), " is not available on this CPU");
#if defined(__SSE2__)
  if (ladder_words_fit(k, part.size(), grid)) {
    // One word per candidate (position and bin), counted, then expanded (collect_words_avx512).
    const std::size_t c = collect_words_avx512(part.data(), part.size(), grid, idx_out);
    count_word_bins(idx_out, c, grid.rungs, bins);
    expand_words_avx512(part.data(), c, offset, idx_out, abs_out);
    return c;
  }
#endif
  const std::size_t c =
      collect_run(k, part.data(), part.size(), grid.value(0), offset, idx_out, abs_out);
  count_bins(abs_out, c, grid, bins);
  return c;
}

bool ladder_words_fit(SelectKernel k, std::size_t part_size, const LadderGrid& grid) {
#if defined(__SSE2__)
  // (mant_bits <= 7: collect_words_avx512's blocks of 2^min(12, 15 - m) >= 256 values hold whole
  // groups of 64, and the words keep the bin's and the sub-bin's bits.)
  return k == SelectKernel::kAvx512 && cpu_has(k) && grid.rungs <= 256 && grid.mant_bits <= 7 &&
         part_size <= kMaxWordPart;
#else
  (void)k;
  (void)part_size;
  (void)grid;
  return false;
#endif
}

std::size_t collect_ladder_words(std::span<const float> part, const LadderGrid& grid,
                                 std::uint32_t* words, std::uint8_t* subs, std::int64_t* bins) {
  check_grid(grid);
  EXDYNA_CHECK_ARG(ladder_words_fit(select_kernel_in_use(), part.size(), grid), "ladder words for ",
                   part.size(), " values and ", grid.rungs,
                   " rungs; expected the AVX-512 kernel, at most 2^24 values and 256 rungs");
#if defined(__SSE2__)
  const std::size_t c = collect_words_avx512(part.data(), part.size(), grid, words, subs);
  count_word_bins(words, c, grid.rungs, bins);
  return c;
#else
  return 0;
#endif
}

std::size_t collect_at_least_with(SelectKernel k, std::span<const float> part, std::uint32_t offset,
                                  float lo, std::uint32_t* idx_out, float* abs_out) {
  EXDYNA_CHECK_ARG(cpu_has(k), "selection kernel ", to_string(k), " is not available on this CPU");
  return collect_run(k, part.data(), part.size(), lo, offset, idx_out, abs_out);
}

std::size_t collect_at_least(std::span<const float> part, std::uint32_t offset, float lo,
                             std::uint32_t* idx_out, float* abs_out) {
  return collect_at_least_with(select_kernel_in_use(), part, offset, lo, idx_out, abs_out);
}

std::size_t count_ladder_candidates_with(SelectKernel k, std::span<const float> part,
                                         const LadderGrid& grid, std::int64_t* bins,
                                         std::uint8_t* byte_scratch, std::uint8_t* group_max) {
  check_grid(grid);
  EXDYNA_CHECK_ARG(cpu_has(k), "selection kernel ", to_string(k), " is not available on this CPU");
  const float lo = grid.value(0);
#if defined(__SSE2__)
  if (k == SelectKernel::kAvx512 && grid.rungs <= 256) {
    const std::size_t c = count_avx512(part.data(), part.size(), lo, grid, byte_scratch, group_max);
    count_bin_bytes(byte_scratch, c, grid.rungs, bins);
    return c;
  }
#endif
  if (group_max) std::fill_n(group_max, part.size() / 64, std::uint8_t{255});
#if defined(__SSE2__)
  if (k != SelectKernel::kScalar) return count_sse2(part.data(), part.size(), lo, grid, bins);
#endif
  PortableCounts counts(lo, grid);
  counts.add(part.data(), 0, part.size());
  return counts.finish(bins);
}

std::size_t count_ladder_candidates(std::span<const float> part, const LadderGrid& grid,
                                    std::int64_t* bins, std::uint8_t* byte_scratch,
                                    std::uint8_t* group_max) {
  return count_ladder_candidates_with(select_kernel_in_use(), part, grid, bins, byte_scratch,
                                      group_max);
}

std::size_t collect_from_rung_with(SelectKernel k, std::span<const float> part,
                                   std::uint32_t offset, const LadderGrid& grid, int rung,
                                   const std::uint8_t* group_max, std::uint32_t* idx_out,
                                   float* abs_out) {
  check_grid(grid);
  EXDYNA_CHECK_ARG(rung >= 0 && rung < grid.rungs, "collection from rung ", rung, "; expected 0..",
                   grid.rungs - 1);
  const float lo = grid.value(rung);
#if defined(__SSE2__)
  if (k == SelectKernel::kAvx512 && cpu_has(k)) {
    static const bool bw = __builtin_cpu_supports("avx512bw");  // after cpu_has's cpu_init
    if (bw)
      return collect_mapped_avx512(part.data(), part.size(), lo, offset, group_max,
                                   static_cast<unsigned>(std::min(rung, 254)), idx_out, abs_out);
  }
#endif
  return collect_at_least_with(k, part, offset, lo, idx_out, abs_out);
}

std::size_t collect_from_rung(std::span<const float> part, std::uint32_t offset,
                              const LadderGrid& grid, int rung, const std::uint8_t* group_max,
                              std::uint32_t* idx_out, float* abs_out) {
  return collect_from_rung_with(select_kernel_in_use(), part, offset, grid, rung, group_max,
                                idx_out, abs_out);
}

std::size_t collect_ladder_candidates(std::span<const float> part, std::uint32_t offset,
                                      const LadderGrid& grid, std::uint32_t* idx_out,
                                      float* abs_out, std::int64_t* bins) {
  return collect_ladder_candidates_with(select_kernel_in_use(), part, offset, grid, idx_out,
                                        abs_out, bins);
}

std::size_t keep_at_least(std::uint32_t* idx, const float* abs, std::size_t count,
                          float threshold) {
  std::size_t c = 0;
  for (std::size_t i = 0; i < count; ++i) {
    idx[c] = idx[i];
    c += abs[i] >= threshold;
  }
  return c;
}

namespace {

std::size_t keep_pairs_tail(std::uint32_t* idx, float* abs, std::size_t i, std::size_t count,
                            float threshold, std::size_t c) {
  for (; i < count; ++i) {
    const float a = abs[i];
    idx[c] = idx[i];
    abs[c] = a;
    c += a >= threshold;  // branch-free, as in keep_at_least
  }
  return c;
}

#if defined(__SSE2__)
// In place: every vector of a group is loaded before any store, and a store at c <= i writes no
// further than the group's own last lane, so nothing unread is overwritten.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) std::size_t keep_pairs_avx512(std::uint32_t* idx, float* abs,
                                                                 std::size_t count,
                                                                 float threshold) {
  const __m512 thr = _mm512_set1_ps(threshold);
  std::size_t c = 0, i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512 a0 = _mm512_loadu_ps(abs + i), a1 = _mm512_loadu_ps(abs + i + 16);
    const __m512i x0 = _mm512_loadu_si512(idx + i), x1 = _mm512_loadu_si512(idx + i + 16);
    const __mmask16 k0 = _mm512_cmp_ps_mask(a0, thr, _CMP_GE_OQ);
    const __mmask16 k1 = _mm512_cmp_ps_mask(a1, thr, _CMP_GE_OQ);
    _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(k0, x0));
    _mm512_storeu_ps(abs + c, _mm512_maskz_compress_ps(k0, a0));
    c += static_cast<std::size_t>(__builtin_popcount(k0));
    _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(k1, x1));
    _mm512_storeu_ps(abs + c, _mm512_maskz_compress_ps(k1, a1));
    c += static_cast<std::size_t>(__builtin_popcount(k1));
  }
  return keep_pairs_tail(idx, abs, i, count, threshold, c);
}
#pragma GCC diagnostic pop

__attribute__((target("avx2"))) std::size_t keep_pairs_avx2(std::uint32_t* idx, float* abs,
                                                            std::size_t count, float threshold) {
  const __m256 thr = _mm256_set1_ps(threshold);
  std::size_t c = 0, i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 a = _mm256_loadu_ps(abs + i);
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + i));
    const auto m = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, thr, _CMP_GE_OQ)));
    const __m256i lanes =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&kLut8.lanes[m])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + c), _mm256_permutevar8x32_epi32(x, lanes));
    _mm256_storeu_ps(abs + c, _mm256_permutevar8x32_ps(a, lanes));
    c += static_cast<std::size_t>(__builtin_popcount(m));
  }
  return keep_pairs_tail(idx, abs, i, count, threshold, c);
}
#endif

}  // namespace

std::size_t keep_pairs_at_least_with(SelectKernel k, std::uint32_t* idx, float* abs,
                                     std::size_t count, float threshold) {
  EXDYNA_CHECK_ARG(cpu_has(k), "selection kernel ", to_string(k), " is not available on this CPU");
  switch (k) {
#if defined(__SSE2__)
    case SelectKernel::kAvx512:
      return keep_pairs_avx512(idx, abs, count, threshold);
    case SelectKernel::kAvx2:
      return keep_pairs_avx2(idx, abs, count, threshold);
#endif
    default:
      return keep_pairs_tail(idx, abs, 0, count, threshold, 0);
  }
}

std::size_t keep_pairs_at_least(std::uint32_t* idx, float* abs, std::size_t count,
                                float threshold) {
  return keep_pairs_at_least_with(select_kernel_in_use(), idx, abs, count, threshold);
}

std::size_t select_threshold_ladder_with(SelectKernel k, std::span<const float> part,
                                         float threshold, std::uint32_t offset, std::uint32_t* out,
                                         const LadderGrid& grid, std::int64_t* bins,
                                         float* abs_scratch) {
  const std::size_t c =
      collect_ladder_candidates_with(k, part, offset, grid, out, abs_scratch, bins);
  if (threshold < grid.value(0)) {
    // Values between the threshold and rung 0 are selected but not candidates: the plain pass.
    return select_threshold_with(k, part, threshold, offset, out);
  }
  return keep_at_least(out, abs_scratch, c, threshold);
}

std::size_t select_threshold_ladder(std::span<const float> part, float threshold,
                                    std::uint32_t offset, std::uint32_t* out,
                                    const LadderGrid& grid, std::int64_t* bins,
                                    float* abs_scratch) {
  return select_threshold_ladder_with(select_kernel_in_use(), part, threshold, offset, out, grid,
                                      bins, abs_scratch);
}

}  // namespace exdyna::sparsifiers
