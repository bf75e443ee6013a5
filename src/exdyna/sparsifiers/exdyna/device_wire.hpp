// The wire of the exact controller's gathered slots in the form a GPU thread reads and writes
// them: the ladder (encode_ladder and decode_ladder of ladder_wire.hpp) and the fused slot's
// entries (fused_gather.hpp), as __host__ __device__ functions over plain arrays that throw
// nothing and allocate nothing; where the CPU functions throw, these return a PlanStatus.
// tests/unit/sparsifiers/exdyna/device_wire_test.cpp holds them to the CPU functions on the CPU;
// exdyna_cuda_check runs the kernels over them (ladder_wire.cu, fused_gather.cu) on a GPU.
//
// The slots are little-endian bytes in int64 words on every host (ladder_wire.hpp); CUDA devices
// are little-endian too, so a word's bytes are read by shifts here and by memcpy on the CPU alike.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exdyna/core/device_rules.hpp"

namespace exdyna::sparsifiers::rules {

enum PlanStatus : int {
  kPlanOk = 0,
  kSlotEndsInNumber = 1,   // decode_ladder: "ladder slot ends inside a number"
  kSlotNumberTooWide = 2,  // "ladder slot holds a number of more than 64 bits"
  kSlotCountTooWide = 3,   // "ladder slot holds a count of ...; expected one that fits 63 bits"
  kSlotPastLadder = 4,     // "ladder slot describes more than the ladder's ... rungs"
  kPlanShareFailed = 5,    // apportion's checks (cannot happen on decoded ladders)
  kOwnCutShort = 6,        // own_cut: "the bins hold only ..."
  kSlotTooSmall = 7,       // encode_ladder: "a ladder slot of ... words cannot hold the count"
  kFusedCountBad = 8,      // fused_count: "fused all-gather slot holds ... indices"
  kFusedPlacesShort = 9,   // unpack_fused: "slot placed ... indices below ..."
  kFusedCapYielded = 10,   // a planned count above the worker's list (the host gathers again)
  kListPastK = 11,         // the counts add up to more than the list's k (not a plan's)
  kCutRungBad = 12,        // take_cut: "ladder cut at rung ..." or "quota ...; expected >= 0"
  kCutQuotaBad = 13,       // take_cut: "ladder cut quota ... exceeds the ... values of bin ..."
};

// The next unsigned LEB128 number of a slot's byte stream (little-endian bytes in int64 words),
// from byte *pos of 8 * words.
EXDYNA_HD int slot_varint(const std::int64_t* slot, std::size_t words, std::size_t* pos,
                          std::uint64_t* v) {
  *v = 0;
  for (int shift = 0;; shift += 7) {
    if (*pos == 8 * words) return kSlotEndsInNumber;
    const auto w = static_cast<std::uint64_t>(slot[*pos / 8]);
    const std::uint64_t byte = (w >> (8 * (*pos % 8))) & 0xffu;
    ++*pos;
    if (!(shift < 64 && (shift < 63 || (byte & 0x7eu) == 0))) return kSlotNumberTooWide;
    *v |= (byte & 0x7fu) << shift;
    if ((byte & 0x80u) == 0) return kPlanOk;
  }
}

// decode_ladder: the count and the `rungs` bins of one slot (every bin written; the rungs the slot
// dropped read 0).
EXDYNA_HD int decode_ladder_slot(const std::int64_t* slot, std::size_t words, int rungs,
                                 std::int64_t* count, std::int64_t* bins) {
  std::size_t pos = 0;
  std::uint64_t c = 0;
  if (const int s = slot_varint(slot, words, &pos, &c)) return s;
  if (c > static_cast<std::uint64_t>(INT64_MAX)) return kSlotCountTooWide;
  *count = static_cast<std::int64_t>(c);
  for (int j = 0; j < rungs; ++j) bins[j] = 0;
  std::int64_t j = rungs - 1;  // the next rung, from the top down
  while (pos != 8 * words) {
    std::uint64_t tok = 0;
    if (const int s = slot_varint(slot, words, &pos, &tok)) return s;
    if (tok == 0) break;  // the end of the stream
    const std::uint64_t n = tok >> 1;
    const bool run = (tok & 1u) != 0;
    if (!(j >= 0 && (!run || n <= static_cast<std::uint64_t>(j + 1)))) return kSlotPastLadder;
    if (run) {
      j -= static_cast<std::int64_t>(n);
    } else {
      bins[j] = static_cast<std::int64_t>(n);
      --j;
    }
  }
  return kPlanOk;
}

// encode_ladder: count, then the non-empty bins from the top rung down (runs of empty bins as one
// token) into all `words` of slot; *lowest: the lowest rung the slot holds (0: all of them).
EXDYNA_HD int encode_ladder_slot(std::int64_t count, const std::int64_t* bins, int rungs,
                                 std::int64_t* slot, std::size_t words, int* lowest) {
  for (std::size_t i = 0; i < words; ++i) slot[i] = 0;
  if (count < 0) return kSlotCountTooWide;
  std::size_t pos = 0;
  const auto varint_bytes = [](std::uint64_t v) {
    std::size_t n = 1;
    for (; v >= 0x80u; v >>= 7) ++n;
    return n;
  };
  const auto put = [&](std::uint64_t v) {
    do {
      const std::uint64_t byte = (v & 0x7fu) | (v >= 0x80u ? 0x80u : 0u);
      auto& w = slot[pos / 8];
      w = static_cast<std::int64_t>(static_cast<std::uint64_t>(w) | byte << (8 * (pos % 8)));
      ++pos;
      v >>= 7;
    } while (v != 0);
  };
  if (varint_bytes(static_cast<std::uint64_t>(count)) > 8 * words) return kSlotTooSmall;
  put(static_cast<std::uint64_t>(count));
  std::int64_t zeros = 0;
  *lowest = 0;
  for (int j = rungs - 1; j >= 0; --j) {
    if (bins[j] < 0) return kSlotCountTooWide;
    if (bins[j] == 0) {
      ++zeros;
      continue;
    }
    const std::uint64_t run = zeros > 0 ? (static_cast<std::uint64_t>(zeros) << 1 | 1u) : 0;
    const std::uint64_t tok = static_cast<std::uint64_t>(bins[j]) << 1;
    const std::size_t need = (zeros > 0 ? varint_bytes(run) : 0) + varint_bytes(tok);
    if (need > 8 * words - pos) {  // rungs below the last bin that fits read as empty
      *lowest = j + 1;
      return kPlanOk;
    }
    if (zeros > 0) put(run);
    put(tok);
    zeros = 0;
  }
  return kPlanOk;
}

// One rank's fused slot (fused_gather.hpp's FusedLayout): [head][L][indices: cap x 4 bytes]
// [places: cap x 2 or 4 bytes].
struct FusedSlot {
  const std::int64_t* words = nullptr;
  std::size_t head_words = 0;
  std::int64_t cap = 0;
  EXDYNA_HD std::size_t place_bytes() const { return cap <= 65536 ? 2 : 4; }
  EXDYNA_HD std::size_t index_words() const { return (static_cast<std::size_t>(cap) * 4 + 7) / 8; }
  // L, or -1 when it is not 0 .. cap (fused_count's DataError).
  EXDYNA_HD std::int64_t count() const {
    const std::int64_t n = words[head_words];
    return n >= 0 && n <= cap ? n : -1;
  }
  // The 4-byte or 2-byte little-endian field i of the area starting at word `from`.
  EXDYNA_HD std::uint32_t field(std::size_t from, std::size_t i, std::size_t width) const {
    const std::size_t byte = i * width;
    const auto w = static_cast<std::uint64_t>(words[from + byte / 8]);
    const std::uint64_t v = w >> (8 * (byte % 8));
    return static_cast<std::uint32_t>(width == 4 ? v & 0xffffffffu : v & 0xffffu);
  }
  EXDYNA_HD std::uint32_t index(std::size_t i) const { return field(head_words + 1, i, 4); }
  EXDYNA_HD std::uint32_t place(std::size_t i) const {
    return field(head_words + 1 + index_words(), i, place_bytes());
  }
};

// unpack_fused: the slot's entries placed below c, in slot (index) order, into out; returns how
// many (c), or -1 with *status set.
EXDYNA_HD std::int64_t unpack_slot_form(const FusedSlot& slot, std::int64_t c, std::uint32_t* out,
                                        int* status) {
  const std::int64_t n = slot.count();
  if (n < 0) {
    *status = kFusedCountBad;
    return -1;
  }
  if (c < 0 || c > n) {
    *status = kFusedCapYielded;
    return -1;
  }
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < n && kept < c; ++i)
    if (slot.place(static_cast<std::size_t>(i)) < static_cast<std::uint64_t>(c))
      out[kept++] = slot.index(static_cast<std::size_t>(i));
  *status = kept == c ? kPlanOk : kFusedPlacesShort;
  return kept == c ? c : -1;
}

}  // namespace exdyna::sparsifiers::rules
