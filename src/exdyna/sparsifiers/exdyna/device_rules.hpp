// The per-element rules of ExDyna's CUDA kernels (device_kernels.hpp beside this file), as
// __host__ __device__ inline functions, so that the CPU tests
// (tests/unit/sparsifiers/exdyna/device_rules_test.cpp) check them against the CPU code they
// mirror: select_threshold, ladder_key and the bins of count_ladder_candidates, and take_cut's
// sub-bin cut. Plain C++ for g++; nvcc marks them __host__ __device__. No CUDA header is needed.
//
// Every rule compares |x| (the sign bit cleared) with a float threshold, as the CPU kernels do:
// NaN never passes, and the integer arithmetic on the bits (shift, unsigned subtract that may wrap,
// clamp to the top rung) is the CPU's, step for step.
#pragma once

#include <algorithm>
#include <cstdint>

#include "exdyna/core/device_rules.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers::rules {

using core::rules::abs_bits;
using core::rules::abs_of;
using core::rules::bits_of;
using core::rules::float_of;

// select_threshold (selection.hpp): |v| >= thr (NaN never passes).
EXDYNA_HD bool passes(float v, float thr) {
  return abs_of(v) >= thr;
}

// ladder_key of |v|.
EXDYNA_HD std::uint32_t key_of(float v, int mant_bits) {
  return abs_bits(v) >> (23 - mant_bits);
}

// A LadderGrid as the kernels use it (make_grid_rule in device_kernels.hpp's sources, from
// LadderGrid: lo = grid.value(0), top = rungs - 1, shift = 23 - mant_bits).
struct GridRule {
  float lo = 0;              // grid.value(0): candidates are |x| >= lo
  std::uint32_t lo_key = 0;  // grid.lo_key
  std::uint32_t top = 0;     // grid.rungs - 1
  int shift = 21;            // 23 - grid.mant_bits
};

// The ladder bin of v as count_ladder_candidates counts it: -1 when |v| < rung 0 (or NaN), else
// min(key(|v|) - lo_key, top) with the subtraction in uint32 (wraps as on the CPU).
EXDYNA_HD int ladder_bin(float v, const GridRule& g) {
  const float a = abs_of(v);
  if (!(a >= g.lo)) return -1;
  const std::uint32_t b = (bits_of(a) >> g.shift) - g.lo_key;
  return static_cast<int>(b < g.top ? b : g.top);
}

// take_cut's cut of one worker's bin `rung` (ladder_cut.cpp, take_cut_scalar): values at or
// above value(rung) (keep_pairs_at_least), of which bins above `rung` are kept whole, and of bin
// `rung` the sub-bins above `last` whole and the first `last_need` of sub-bin `last` in index
// order (last = sub_mask + 1: none of the bin).
struct CutRule {
  float at_least = 0;        // grid.value(rung)
  std::uint32_t lo_key = 0;  // grid.lo_key
  std::uint32_t top = 0;     // grid.rungs - 1
  int shift = 21;            // 23 - grid.mant_bits
  int sub_shift = 13;        // shift - min(8, shift)
  std::uint32_t sub_mask = 255;
  std::uint32_t rung = 0;
  std::uint32_t last = 256;  // from sub_cut (sub_mask + 1: no sub-bin)
};

// The sub-bin take_cut's first pass counts v in, or -1 when v is not in bin `rung` (or is below
// value(rung), or NaN).
EXDYNA_HD int cut_sub_bin(float v, const CutRule& c) {
  const float a = abs_of(v);
  if (!(a >= c.at_least)) return -1;
  const std::uint32_t bits = bits_of(a);
  const std::uint32_t b0 = (bits >> c.shift) - c.lo_key;
  const std::uint32_t b = b0 < c.top ? b0 : c.top;
  if (b != c.rung) return -1;
  return static_cast<int>((bits >> c.sub_shift) & c.sub_mask);
}

// The kernels' classes of an element for the cut: dropped, kept, or kept when among the first
// `last_need` of sub-bin `last` (in index order: the kernels rank those).
enum CutClass : std::uint8_t { kCutDrop = 0, kCutKeep = 1, kCutRanked = 2 };

EXDYNA_HD std::uint8_t cut_class(float v, const CutRule& c) {
  const float a = abs_of(v);
  if (!(a >= c.at_least)) return kCutDrop;
  const std::uint32_t bits = bits_of(a);
  const std::uint32_t b0 = (bits >> c.shift) - c.lo_key;
  const std::uint32_t b = b0 < c.top ? b0 : c.top;
  if (b > c.rung) return kCutKeep;
  if (b != c.rung) return kCutDrop;
  const std::uint32_t s = (bits >> c.sub_shift) & c.sub_mask;
  if (s > c.last && c.last <= c.sub_mask) return kCutKeep;
  if (s == c.last) return kCutRanked;
  return kCutDrop;
}

// find_sub_cut (ladder_cut.cpp), from the sub-bin counts of bin `rung`
// (sub_mask + 1 entries): the sub-bin holding the quota-th largest value and how many of it are
// taken. quota 0: last = sub_mask + 1, need 0. The caller has checked quota <= sum(sub).
struct SubCut {
  std::uint32_t last = 256;
  std::int64_t last_need = 0;
};
template <typename Count>
EXDYNA_HD SubCut sub_cut(const Count* sub, std::uint32_t sub_mask, std::int64_t quota) {
  SubCut cut{sub_mask + 1, 0};
  if (quota > 0) {
    std::int64_t above = 0;
    for (std::uint32_t s = sub_mask + 1; s-- > 0;) {
      const auto here = static_cast<std::int64_t>(sub[s]);
      if (above + here >= quota) {
        cut.last = s;
        cut.last_need = quota - above;
        break;
      }
      above += here;
    }
  }
  return cut;
}

// LadderGrid::value(j) of the grid (lo_key, mant_bits): the key's float, clamped to +Inf.
EXDYNA_HD float grid_value(std::uint32_t lo_key, int mant_bits, int j) {
  const std::int64_t key = static_cast<std::int64_t>(lo_key) + j;
  const std::int64_t inf_key = 0x7f800000 >> (23 - mant_bits);
  return float_of(static_cast<std::uint32_t>(key < inf_key ? key : inf_key) << (23 - mant_bits));
}

// The rules of a grid and of a cut. The cut's rule before its sub-bin is known (last = none), for
// cut_sub_bin; set last after. cut_rule_at builds it where only the device knows the rung.
EXDYNA_HD CutRule cut_rule_at(std::uint32_t lo_key, int mant_bits, int rungs, int rung) {
  CutRule c;
  c.at_least = grid_value(lo_key, mant_bits, rung);
  c.lo_key = lo_key;
  c.top = static_cast<std::uint32_t>(rungs - 1);
  c.shift = 23 - mant_bits;
  const int sub_bits = c.shift < 8 ? c.shift : 8;
  c.sub_shift = c.shift - sub_bits;
  c.sub_mask = (1u << sub_bits) - 1;
  c.rung = static_cast<std::uint32_t>(rung);
  c.last = c.sub_mask + 1;
  return c;
}
inline GridRule make_grid_rule(const LadderGrid& grid) {
  GridRule g;
  g.lo = grid.value(0);
  g.lo_key = grid.lo_key;
  g.top = static_cast<std::uint32_t>(grid.rungs - 1);
  g.shift = 23 - grid.mant_bits;
  return g;
}
inline CutRule make_cut_rule(const LadderGrid& grid, int rung) {
  return cut_rule_at(grid.lo_key, grid.mant_bits, grid.rungs, rung);
}

// fused_gather.hpp's cut_order_key of |x| (abs_value, sign already cleared) in the grid (lo_key,
// mant_bits, rungs): its ladder bin clamped to the top rung, then the sub-bin of the next 8
// mantissa bits.
EXDYNA_HD std::uint32_t order_key(float abs_value, std::uint32_t lo_key, int mant_bits, int rungs) {
  const int shift = 23 - mant_bits;
  const int sub_bits = shift < 8 ? shift : 8;
  const std::uint32_t bits = bits_of(abs_value);
  const auto top = static_cast<std::uint32_t>(rungs - 1);
  const std::uint32_t b = (bits >> shift) - lo_key;
  const std::uint32_t bin = b < top ? b : top;
  const std::uint32_t sub = (bits >> (shift - sub_bits)) & ((1u << sub_bits) - 1);
  return bin << 8 | sub;
}

// BlockLayout::block_of for 32-bit indices: the remainder belongs to the last block.
EXDYNA_HD std::uint64_t block_of(std::uint32_t i, std::uint64_t block_size,
                                 std::uint64_t n_blocks) {
  const std::uint64_t b = static_cast<std::uint64_t>(i) / block_size;
  return b < n_blocks ? b : n_blocks - 1;
}

}  // namespace exdyna::sparsifiers::rules
