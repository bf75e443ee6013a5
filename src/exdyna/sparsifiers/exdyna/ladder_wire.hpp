// The ladder on the wire. The histogram and exact controllers gather every worker's
// ladder (R bins, 129 by default) with its count; as R + 1 int64 per rank that was a fifth of all
// bytes sent at d = 0.001 (8 workers, n_g = 4M). Most bins are empty (the ladder reaches 7.75
// octaves above the threshold) and the rest hold small counts, so each rank packs its count and
// its bins into a fixed slot of a few int64 words instead:
//   * a byte stream, packed little-endian into the words (so every host reads the same bytes);
//   * first the count, as an unsigned LEB128 varint (7 bits a byte, any size);
//   * then the bins from the TOP rung down, as varint tokens: a non-empty bin of c values is
//     2c, a run of z empty bins is 2z + 1; the stream ends at a 0 byte or the slot's end, and
//     every rung below the last token holds 0 (so empty bins at the bottom cost nothing).
// Top-down is the order in which the plan reads a ladder (sparsifiers::plan_worker_counts:
// cumulative counts from the top down to the cut), so when a ladder does not fit, the slot holds
// its top rungs and drops the lowest ones, which matter only when the cut falls there. Such a
// ladder is decoded as if those rungs were empty; every rank (the sender too) decodes the same
// bytes, so every rank still computes the same plan. The fixed slot keeps the count all-gather one
// collective of a size every rank knows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace exdyna::sparsifiers {

// Bytes of the full stream of (count, bins), terminator excluded: what a slot needs to hold it
// without dropping a rung.
std::size_t ladder_wire_bytes(std::int64_t count, std::span<const std::int64_t> bins);

// Encodes count (>= 0) and bins (each >= 0, top rung last) into slot (all of it is written).
// Returns the lowest rung whose bin the slot holds: 0 when the whole ladder fits, R when only the
// count does. Throws InvalidArgument when the slot cannot hold the count or a value is negative.
int encode_ladder(std::int64_t count, std::span<const std::int64_t> bins,
                  std::span<std::int64_t> slot);

// Decodes a slot written by encode_ladder for a ladder of bins.size() rungs into count and bins
// (every entry written; rungs the slot dropped read 0). Throws DataError on a stream that runs
// past the ladder's top or bottom or holds a count that does not fit an int64.
void decode_ladder(std::span<const std::int64_t> slot, std::int64_t& count,
                   std::span<std::int64_t> bins);

}  // namespace exdyna::sparsifiers
