// ExDyna's own passes on a device-resident gradient: the same decisions as the CPU code of
// selection.hpp, ladder_cut.hpp and partition.hpp on the same input (the per-element rules are
// shared, device_rules.hpp; the plan's and the wire's, device_plan.hpp and device_wire.hpp). Over
// core/device_kernels.hpp's workspace; the definitions are in selection.cu, ladder_cut.cu,
// ladder_wire.cu, fused_gather.cu and partition.cu, built into exdyna_cuda_kernels only where nvcc
// is found (no fallback implementation: link this only where it is built). Arguments the CPU code
// refuses (a ladder grid out of range, a cut's rung or quota) throw exdyna::InvalidArgument as it
// does.
#pragma once

#include <cstddef>
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

// ladder_count without the host: the grid's bins (grid.rungs device entries, OVERWRITTEN, as
// int64) and their sum into *d_count. Enqueued only.
void ladder_count_async(Workspace&, const float* d_part, std::int64_t n, const LadderGrid& grid,
                        std::int64_t* d_bins, std::int64_t* d_count);

// take_cut with the cut's rung and quota in device memory (d_rung_quota[0] and [1], as plan_counts
// writes this worker's own cut), enqueued only: the same indices, in the same order, into d_out,
// and their count into *d_kept. *d_status: rules::PlanStatus; kCutRungBad or kCutQuotaBad where
// take_cut throws, and then nothing is kept.
void take_cut_async(Workspace&, const float* d_part, std::int64_t n, std::uint32_t offset,
                    const LadderGrid& grid, const std::int64_t* d_rung_quota, std::uint32_t* d_out,
                    std::uint32_t* d_kept, std::int64_t* d_status);

// BlockLayout::count_per_block: h_hits[b] += how many of the m indices lie in block b, with
// block_of as in partition.hpp (the last block holds the remainder); h_hits has n_blocks host
// entries. Synchronizes.
void count_per_block(Workspace&, const std::uint32_t* d_idx, std::int64_t m,
                     std::int64_t block_size, std::int64_t n_blocks, std::uint32_t* h_hits);
// The same left on the device: d_hits (n_blocks device entries) OVERWRITTEN with the counts of the
// indices below `limit` (a resident step's list, whose padding is at `limit`). Enqueued only.
void count_per_block_async(Workspace&, const std::uint32_t* d_idx, std::int64_t m,
                           std::int64_t limit, std::int64_t block_size, std::int64_t n_blocks,
                           std::uint32_t* d_hits);

// The exact controller's plan of one step from every rank's gathered slot (ladder_wire.hpp's
// ladder at the start of each), without the host: ladder_cut.cu runs device_plan.hpp's forms of
// decode_ladder, plan_worker_counts and own_cut in one block, enqueued on the workspace's stream.
// Nothing synchronizes and nothing is read back; d_out (plan_out_words entries) receives, in
// device memory, what the step's next kernels read:
//   [0, workers)  each worker's count (plan_worker_counts' counts)
//   workers       the total
//   workers + 1   this worker's own cut of its count in d_own_bins: the rung,
//   workers + 2   and the quota (own_cut)
//   workers + 3   rules::PlanStatus (kPlanOk, or why the plan failed: the counts are then not one)
//   workers + 4   the first worker whose slot failed to decode (-1: none)
struct PlanShape {
  int workers = 0;
  int rungs = 0;                 // bins per ladder (1..257)
  std::size_t slot_stride = 0;   // int64 words from one rank's slot to the next
  std::size_t ladder_words = 0;  // the ladder's words at the start of each slot (>= 1)
  std::int64_t k = 0;            // >= 1
  std::int64_t cap = 0;          // the worker cap; <= 0: none
  int rank = 0;                  // the worker whose own cut is computed
};
constexpr std::size_t plan_out_words(int workers) {
  return static_cast<std::size_t>(workers) + 5;
}
// d_own_bins: this worker's own `rungs` bins (the full ladder it counted; its slot may have dropped
// the lowest rungs), or nullptr: its decoded ladder, as ExDyna's gather_counts leaves it. Throws
// InvalidArgument on a shape the CPU plan refuses.
void plan_counts(Workspace&, const std::int64_t* d_slots, const PlanShape& shape,
                 const std::int64_t* d_own_bins, std::int64_t* d_out);

// This worker's ladder slot (ladder_wire.hpp's encode_ladder) from its count (*d_count) and its
// `rungs` bins in device memory, written by one thread into the `words` words at d_slot; enqueued
// only. d_result[0]: rules::PlanStatus (kSlotTooSmall where encode_ladder throws), d_result[1]:
// the lowest rung the slot holds.
void encode_slot(Workspace&, const std::int64_t* d_count, const std::int64_t* d_bins, int rungs,
                 std::int64_t* d_slot, std::size_t words, std::int64_t* d_result);

// This worker's fused slot (ExDyna::pack_own_list with gather_counts' ladder; resident_step.hpp's
// pack_slot) from its partition acc[offset, offset + len), without the host: the count pass in
// floor_grid, its bins from rung `floor` of the full ladder (`rungs` bins), the L = min(count,
// cap) largest candidates (own_cut of L on the full ladder, take_cut at its rung from the floor),
// each one's place in the cut's order (cut_order_key, lower index first), and the slot: the ladder
// encoded in its first ladder_words, zeros to head_words, L, the indices, the places. The same
// words as pack_fused on the CPU's cut. Enqueued only. d_result (7 words): the count, L, the own
// cut's rules::PlanStatus, take_cut's, encode_slot's, the lowest rung the slot holds, and
// kFusedPlacesShort where the cut kept other than L (else 0).
struct PackShape {
  std::int64_t len = 0;      // the partition's values
  std::uint32_t offset = 0;  // its first index in acc
  LadderGrid floor_grid;     // the step's grid from this worker's floor
  int floor = 0;             // the floor's rung in the full ladder
  int rungs = 0;             // the full ladder's bins (floor + floor_grid.rungs)
  std::size_t ladder_words = 0;
  std::size_t head_words = 0;  // FusedLayout::head_words (>= ladder_words)
  std::int64_t cap = 0;        // FusedLayout::cap (>= 1)
};
void pack_slot(Workspace&, const float* d_acc, const PackShape& shape, std::int64_t* d_slot,
               std::int64_t* d_result);

// The gathered selection of a fused all-gather (ExDyna's unpack_lists) from every rank's slot
// (fused_gather.hpp's layout, `slot_stride` words apart) and the planned counts in device memory:
// d_idx receives k entries, each rank's indices placed below its count in rank order (a count
// above the rank's list takes the whole list, resident_step.hpp's rule; a rank with count 0 gives
// its one index, d_one[rank]), then the sentinel up to k. Enqueued only. d_result[0]: how many
// are indices (-1: none, a slot or count is bad or they pass k), d_result[1]: rules::PlanStatus
// (kFusedCapYielded, the list valid, where some count was above its list), d_result[2]: the first
// rank at fault (-1: none), d_result[3]: 0, or 1 + a rank whose slot placed fewer than its count
// below it (unpack_fused's DataError: the list is not one).
struct UnpackShape {
  int workers = 0;
  std::size_t slot_stride = 0;  // int64 words from one rank's slot to the next
  std::size_t head_words = 0;   // FusedLayout::head_words
  std::int64_t cap = 0;         // FusedLayout::cap (>= 1)
  std::int64_t k = 0;           // the list's length (>= 1)
  std::uint32_t sentinel = 0;   // the padding's index
};
void unpack_lists(Workspace&, const std::int64_t* d_slots, const UnpackShape& shape,
                  const std::int64_t* d_counts, const std::uint32_t* d_one, std::uint32_t* d_idx,
                  std::int64_t* d_result);

}  // namespace exdyna::sparsifiers::device
