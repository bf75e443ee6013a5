// The exact controller's fused all-gather: one collective for the counts, the ladders and the
// indices, instead of the count all-gather followed by the index all-gather.
//
// Under a worker cap no worker sends more than the cap unless the cap yields (plan_worker_counts),
// so before the plan is known each worker can send, with its count and ladder, its L = min(cap,
// candidates) largest candidates. Its own cut of any c <= L values (own_cut and take_cut) keeps
// the c first of them in the order (ladder bin, sub-bin) from the top, lower index first: the cut
// of c is a prefix of the cut of c + 1 in that order. So each index travels with its place in that
// order, and once every rank has planned the counts c_j from the gathered ladders, it keeps of
// worker j's list the entries placed below c_j, in index order: the indices take_cut keeps, in the
// order the three-collective path gathers them. Where a plan gives some worker more than its list
// holds (the cap yielded), every rank sees it in the same gathered data and the step falls back to
// the index all-gather.
//
// One rank's slot, in int64 words (little-endian bytes, as the ladder's):
//   [ladder: `ladder_words`][timing: 0 or 1 word][L][indices: cap x 4 bytes][places: cap x 2 or 4]
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

struct FusedLayout {
  std::size_t head_words = 0;  // the ladder slot and the timing word, before L
  std::int64_t cap = 0;        // most indices one slot holds

  // A place needs 2 bytes while the cap fits 16 bits.
  std::size_t place_bytes() const { return cap <= 65536 ? 2 : 4; }
  std::size_t index_words() const { return (static_cast<std::size_t>(cap) * 4 + 7) / 8; }
  std::size_t place_words() const {
    return (static_cast<std::size_t>(cap) * place_bytes() + 7) / 8;
  }
  std::size_t slot_words() const { return head_words + 1 + index_words() + place_words(); }
};

// The key take_cut orders one candidate's |x| by, in `grid` (its ladder bin, clamped to the top
// rung, then the sub-bin of the next 8 mantissa bits): larger keys are kept first, and among equal
// keys the lower index.
std::uint32_t cut_order_key(float abs_value, const LadderGrid& grid);

// The sender: `kept` holds the indices this worker's cut of L = kept.size() values keeps (index
// order), `keys` their cut_order_key. Writes L, the indices and each one's place in the cut's order
// into slot (everything after the head; the head is the caller's). L must be at most the cap.
// scratch is reused between steps.
void pack_fused(std::span<const std::uint32_t> kept, std::span<const std::uint32_t> keys,
                const FusedLayout& layout, std::span<std::int64_t> slot,
                std::vector<std::uint64_t>& scratch);

// The L a gathered slot holds (checked against the cap: DataError otherwise).
std::int64_t fused_count(std::span<const std::int64_t> slot, const FusedLayout& layout);

// The receiver: appends to out the indices of the slot placed below c (c <= fused_count), in index
// order; returns how many (c).
std::size_t unpack_fused(std::span<const std::int64_t> slot, const FusedLayout& layout,
                         std::int64_t c, std::vector<std::uint32_t>& out);

// Whether the fused all-gather costs less than the two it replaces, from the engine's measured
// cost of one small all-gather (seconds) and of each gathered byte (seconds per byte): it saves
// one collective's latency and sends `extra_bytes` more (negative: fewer).
bool fused_pays(double allgather_seconds, double seconds_per_byte, double extra_bytes);

}  // namespace exdyna::sparsifiers
