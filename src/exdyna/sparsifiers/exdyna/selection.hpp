// Partition-wise threshold selection (paper Alg. 4): the indices of every |x| >= threshold in one
// contiguous partition. This pass reads the partition once and is meant to run at memory speed:
// at d <= 0.01 almost no group of 16 values holds a selected one, so the kernel compares 16
// floats at a time (SSE2, baseline x86-64) and skips the group when none passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

namespace exdyna::sparsifiers {

// A threshold estimated in double, as select_threshold compares it: in float, and never 0 (which
// would select exact zeros): the smallest positive float instead.
inline float as_compare_threshold(double threshold) {
  const float f = static_cast<float>(threshold);
  return f > 0 ? f : std::numeric_limits<float>::denorm_min();
}

// Writes offset + i for every i with |part[i]| >= threshold, in increasing order, into out
// (the caller guarantees room for part.size() entries) and returns how many. NaN never passes.
// Entries of out past the count (below part.size()) may be overwritten.
std::size_t select_threshold(std::span<const float> part, float threshold, std::uint32_t offset,
                             std::uint32_t* out);

// The same, one element at a time: the reference the tests compare the fast kernel with.
std::size_t select_threshold_scalar(std::span<const float> part, float threshold,
                                    std::uint32_t offset, std::uint32_t* out);

// The implementations behind select_threshold, picked once at run time from what the CPU offers
// (the build itself targets baseline x86-64). Exposed so tests can check every one this CPU runs.
// The vector kernels store whole vectors of indices: entries past the returned count, up to
// part.size(), are overwritten with scratch.
enum class SelectKernel { kScalar, kSse2, kAvx2, kAvx512 };
const char* to_string(SelectKernel k);
bool select_kernel_available(SelectKernel k);
SelectKernel select_kernel_in_use();
std::size_t select_threshold_with(SelectKernel k, std::span<const float> part, float threshold,
                                  std::uint32_t offset, std::uint32_t* out);

// ---- The histogram ladder (ExDynaOptions::controller = kHistogram and kExact) ----
//
// Rungs sit on a grid of exactly representable floats: key(v) = bits(v) >> (23 - m) keeps the
// exponent and the top m mantissa bits, so rung values are 2^(1/2^m) apart (m = 2: 4 rungs per
// octave, 19% apart) and |x| >= value(K) holds exactly when key(|x|) >= K. Counting is then one
// shift, a subtract and a clamp per element above the lowest rung, no compare per rung.
struct LadderGrid {
  int mant_bits = 2;         // m, 0..10
  std::uint32_t lo_key = 0;  // key of rung 0
  int rungs = 33;            // R
  // Value of rung j (j may exceed R-1: the grid goes on).
  float value(int j) const;
};
std::uint32_t ladder_key(float v, int mant_bits);  // of |v|
float ladder_value(std::uint32_t key, int mant_bits);

// The ladder's candidates: every |x| >= grid.value(0) of part (NaN never), their indices
// offset + i in increasing order into idx_out and their |x| into abs_out, and the ladder bins of
// the candidates added to bins (R entries, not cleared): bins[j] += #{key(|x|) = lo_key + j} for
// j < R - 1, bins[R - 1] += #{key(|x|) >= lo_key + R - 1}. Returns the number of candidates.
// Both outputs need room for part.size() entries; entries past the count may be overwritten.
//
// Two passes, the second over the candidates only: the streaming pass over part is branch-free
// compaction (AVX-512 compress, AVX2 permute by table), and the bins are counted afterwards in a
// tight loop over the compacted values. Counting while streaming took a data-dependent inner
// loop per group of 16 whose trip count the branch predictor cannot learn (about 11% of the
// values lie above rung 0 at d = 0.01 on 8 workers): 6x the plain selection pass at 25M.
// The AVX-512 kernel (ladders of at most 256 rungs, parts of at most 2^24 values) stores one word
// per candidate in the streaming pass, its position and bin, counts the bins from the words and
// then expands them to the indices and values: one vector store per 16 values instead of two.
std::size_t collect_ladder_candidates(std::span<const float> part, std::uint32_t offset,
                                      const LadderGrid& grid, std::uint32_t* idx_out,
                                      float* abs_out, std::int64_t* bins);
// With a given implementation (kScalar and kSse2 share the portable version).
std::size_t collect_ladder_candidates_with(SelectKernel k, std::span<const float> part,
                                           std::uint32_t offset, const LadderGrid& grid,
                                           std::uint32_t* idx_out, float* abs_out,
                                           std::int64_t* bins);

// The exact controller's one-pass collection as words, which it cuts
// after the plan (take_cut_words in ladder_cut.hpp): word = position in part << 8 | bin (clamped
// to the top rung), in increasing position, the bins added to bins. Expanding every candidate to
// an index and a value and compacting them again in take_cut cost a store, a gather and a
// compaction per candidate, of which the cut keeps about half (d = 0.01, the steady quarter octave
// of reach) to a tenth. subs: each word's sub-bin, the 8 bits of |x| below its bin
// (as take_cut resolves its cut bin), so that the cut never reads the partition again. Only where
// ladder_words_fit: the AVX-512 kernel (on this CPU), at most 256 rungs of at most 7 mantissa bits
// and 2^24 values. words, subs: room for part.size() entries.
bool ladder_words_fit(SelectKernel k, std::size_t part_size, const LadderGrid& grid);
std::size_t collect_ladder_words(std::span<const float> part, const LadderGrid& grid,
                                 std::uint32_t* words, std::uint8_t* subs, std::int64_t* bins);

// The exact controller's two-pass collection (docs/controller.md): on real gradients a
// worker's ladder may hold 10-100x its k_i (LSTM: 8,000-110,000 candidates for k_i = 1,083), and
// writing all of them cost more than the plain pass. The first pass only counts: the same count and
// the same bins as collect_ladder_candidates (added to bins, not cleared), no index or value
// written. byte_scratch: room for part.size() bytes, overwritten (the AVX-512 kernel compresses
// each candidate's bin into one byte there and counts the bytes afterwards; ladders of more than
// 256 rungs take the portable path). group_max (optional, part.size() / 64 bytes): for each whole
// group of 64 values, a byte above min(r, 254) whenever the group holds a candidate of bin r or
// above (0: no candidate), which lets collect_from_rung skip the groups below a worker's cut;
// kernels that do not compute it write 255 (read every group).
std::size_t count_ladder_candidates(std::span<const float> part, const LadderGrid& grid,
                                    std::int64_t* bins, std::uint8_t* byte_scratch,
                                    std::uint8_t* group_max = nullptr);
std::size_t count_ladder_candidates_with(SelectKernel k, std::span<const float> part,
                                         const LadderGrid& grid, std::int64_t* bins,
                                         std::uint8_t* byte_scratch,
                                         std::uint8_t* group_max = nullptr);

// The second pass, after the plan: every |x| >= lo of part (NaN never), indices offset + i in
// increasing order into idx_out and |x| into abs_out, as collect_ladder_candidates writes them for
// a ladder whose rung 0 is lo, without the bins. Returns how many. With lo = grid.value(rung) it
// yields exactly the candidates of collect_ladder_candidates(grid) at or above `rung`, in the
// same order, which is all take_cut keeps of them.
std::size_t collect_at_least(std::span<const float> part, std::uint32_t offset, float lo,
                             std::uint32_t* idx_out, float* abs_out);
std::size_t collect_at_least_with(SelectKernel k, std::span<const float> part, std::uint32_t offset,
                                  float lo, std::uint32_t* idx_out, float* abs_out);

// collect_at_least(part, offset, grid.value(rung), ...), reading only the groups of 64 whose
// group_max (from count_ladder_candidates on the same part and grid) says they hold a value of
// bin `rung` or above: the same indices and values in the same order (the AVX-512 kernel, where
// the CPU has AVX-512BW for the byte compares; the others read every group).
std::size_t collect_from_rung(std::span<const float> part, std::uint32_t offset,
                              const LadderGrid& grid, int rung, const std::uint8_t* group_max,
                              std::uint32_t* idx_out, float* abs_out);
std::size_t collect_from_rung_with(SelectKernel k, std::span<const float> part,
                                   std::uint32_t offset, const LadderGrid& grid, int rung,
                                   const std::uint8_t* group_max, std::uint32_t* idx_out,
                                   float* abs_out);

// Keeps, in place and in order, the candidates with abs >= threshold; returns how many.
std::size_t keep_at_least(std::uint32_t* idx, const float* abs, std::size_t count, float threshold);

// The same, compacting abs alongside idx (both in place, in order): what take_cut runs first, so
// that its sub-bin passes see only the candidates at or above the cut's bin (on real
// gradients the ladder's candidates were 10-100x a worker's k_i, and take_cut's two passes over
// all of them cost more than the selection pass itself). Vector kernels as in
// collect_ladder_candidates; entries past the returned count hold scratch.
std::size_t keep_pairs_at_least(std::uint32_t* idx, float* abs, std::size_t count, float threshold);
std::size_t keep_pairs_at_least_with(SelectKernel k, std::uint32_t* idx, float* abs,
                                     std::size_t count, float threshold);

// select_threshold and the ladder's bins of the same values: collect_ladder_candidates, then
// keep_at_least(threshold). abs_scratch needs room for part.size() floats.
std::size_t select_threshold_ladder(std::span<const float> part, float threshold,
                                    std::uint32_t offset, std::uint32_t* out,
                                    const LadderGrid& grid, std::int64_t* bins, float* abs_scratch);
// With a given implementation.
std::size_t select_threshold_ladder_with(SelectKernel k, std::span<const float> part,
                                         float threshold, std::uint32_t offset, std::uint32_t* out,
                                         const LadderGrid& grid, std::int64_t* bins,
                                         float* abs_scratch);
// The same one element at a time (the tests' reference).
std::size_t select_threshold_ladder_scalar(std::span<const float> part, float threshold,
                                           std::uint32_t offset, std::uint32_t* out,
                                           const LadderGrid& grid, std::int64_t* bins);

}  // namespace exdyna::sparsifiers
