// ExDyna's own passes on a device-resident gradient: the same decisions as the CPU code of
// selection.hpp, ladder_cut.hpp and partition.hpp on the same input (the per-element rules are
// shared, device_rules.hpp). Over core/device_kernels.hpp's workspace; the definitions are in
// selection.cu and partition.cu, built into exdyna_cuda_kernels only where nvcc is found (no
// fallback implementation: link this only where it is built). Arguments the CPU code refuses (a
// ladder grid out of range, a cut's rung or quota) throw exdyna::InvalidArgument as it does.
#pragma once

#include <cstdint>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers::device {

using core::device::Workspace;

// select_threshold (selection.hpp): out[j] = offset + i for every |part[i]| >= thr (NaN never), in
// increasing order; returns the count. d_out needs room for the count (n entries always suffice);
// nothing past the count is written. n < 2^32. Synchronizes.
std::int64_t select_threshold(Workspace&, const float* d_part, std::int64_t n, float thr,
                              std::uint32_t offset, std::uint32_t* d_out);

// The ladder's count pass: the count and the bins of count_ladder_candidates(part, grid,
// bins, ...): h_bins has grid.rungs host entries, ADDED to. Returns the number of candidates.
// The grid as the CPU accepts it (2..257 rungs, 0..10 mantissa bits). Synchronizes.
std::int64_t ladder_count(Workspace&, const float* d_part, std::int64_t n, const LadderGrid& grid,
                          std::int64_t* h_bins);

// The exact controller's own cut: exactly the indices, in order, that take_cut(idx, abs,
// count, grid, rung, quota) keeps of collect_ladder_candidates(part, offset, grid, ...): bins
// above `rung` whole, and the `quota` largest of bin `rung` resolved to 1/256 sub-bins, ties to the
// lower index (the top rung is open-ended: its sub-bin is the 8 bits below each value's own key,
// as on the CPU). Throws InvalidArgument where the CPU does (rung outside 0..rungs-1, quota < 0,
// quota above the bin's count). d_out: room for the count. Synchronizes.
std::int64_t take_cut(Workspace&, const float* d_part, std::int64_t n, std::uint32_t offset,
                      const LadderGrid& grid, int rung, std::int64_t quota, std::uint32_t* d_out);

// BlockLayout::count_per_block: h_hits[b] += how many of the m indices lie in block b, with
// block_of as in partition.hpp (the last block holds the remainder); h_hits has n_blocks host
// entries. Synchronizes.
void count_per_block(Workspace&, const std::uint32_t* d_idx, std::int64_t m,
                     std::int64_t block_size, std::int64_t n_blocks, std::uint32_t* h_hits);

}  // namespace exdyna::sparsifiers::device
