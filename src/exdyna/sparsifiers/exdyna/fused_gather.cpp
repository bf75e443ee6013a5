#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/device_rules.hpp"

namespace exdyna::sparsifiers {

// The indices and places are the words' bytes as this host lays them out; the slot is read as
// little-endian bytes everywhere (ladder_wire.hpp), so only such hosts may share a job.
static_assert(std::endian::native == std::endian::little,
              "the fused all-gather's slot is laid out for little-endian hosts");

namespace {

std::byte* bytes_at(std::span<std::int64_t> slot, std::size_t word) {
  return reinterpret_cast<std::byte*>(slot.data() + word);
}
const std::byte* bytes_at(std::span<const std::int64_t> slot, std::size_t word) {
  return reinterpret_cast<const std::byte*>(slot.data() + word);
}

std::uint32_t place_at(const std::byte* places, std::size_t i, std::size_t width) {
  if (width == 2) {
    std::uint16_t p;
    std::memcpy(&p, places + 2 * i, 2);
    return p;
  }
  std::uint32_t p;
  std::memcpy(&p, places + 4 * i, 4);
  return p;
}

void check_slot(std::size_t words, const FusedLayout& layout) {
  EXDYNA_CHECK_ARG(words == layout.slot_words(), "fused all-gather slot of ", words,
                   " words; expected ", layout.slot_words(), " for a cap of ", layout.cap);
}

}  // namespace

std::uint32_t cut_order_key(float abs_value, const LadderGrid& grid) {
  // As take_cut reads a candidate (ladder_cut.cpp, take_cut_scalar); the device's rule.
  return rules::order_key(abs_value, grid.lo_key, grid.mant_bits, grid.rungs);
}

void pack_fused(std::span<const std::uint32_t> kept, std::span<const std::uint32_t> keys,
                const FusedLayout& layout, std::span<std::int64_t> slot,
                std::vector<std::uint64_t>& scratch) {
  check_slot(slot.size(), layout);
  const std::size_t n = kept.size();
  EXDYNA_CHECK_ARG(keys.size() == n && static_cast<std::int64_t>(n) <= layout.cap,
                   "fused all-gather of ", n, " indices with ", keys.size(),
                   " keys; expected as many keys and at most the cap, ", layout.cap);
  std::fill(slot.begin() + static_cast<std::ptrdiff_t>(layout.head_words), slot.end(), 0);
  slot[layout.head_words] = static_cast<std::int64_t>(n);
  const std::size_t idx_word = layout.head_words + 1;
  if (n > 0) std::memcpy(bytes_at(slot, idx_word), kept.data(), n * sizeof(std::uint32_t));
  // The cut's order: larger key first, then lower index; sorting (inverted key, position in
  // kept) gives each entry's place.
  scratch.resize(n);
  for (std::size_t i = 0; i < n; ++i) scratch[i] = std::uint64_t{~keys[i]} << 32 | i;
  std::sort(scratch.begin(), scratch.end());
  std::byte* places = bytes_at(slot, idx_word + layout.index_words());
  const std::size_t width = layout.place_bytes();
  for (std::size_t place = 0; place < n; ++place) {
    const std::size_t i = scratch[place] & 0xffffffffu;
    const auto p = static_cast<std::uint32_t>(place);
    if (width == 2) {
      const auto p16 = static_cast<std::uint16_t>(p);
      std::memcpy(places + 2 * i, &p16, 2);
    } else {
      std::memcpy(places + 4 * i, &p, 4);
    }
  }
}

std::int64_t fused_count(std::span<const std::int64_t> slot, const FusedLayout& layout) {
  check_slot(slot.size(), layout);
  const std::int64_t n = slot[layout.head_words];
  EXDYNA_CHECK_T(DataError, n >= 0 && n <= layout.cap, "fused all-gather slot holds ", n,
                 " indices; expected 0 .. the cap, ", layout.cap);
  return n;
}

std::size_t unpack_fused(std::span<const std::int64_t> slot, const FusedLayout& layout,
                         std::int64_t c, std::vector<std::uint32_t>& out) {
  const std::int64_t n = fused_count(slot, layout);
  EXDYNA_CHECK_ARG(c >= 0 && c <= n, "fused all-gather: ", c, " indices asked of a slot of ", n);
  const std::size_t idx_word = layout.head_words + 1;
  const std::byte* idx = bytes_at(slot, idx_word);
  const std::byte* places = bytes_at(slot, idx_word + layout.index_words());
  const std::size_t width = layout.place_bytes();
  const std::size_t start = out.size();
  out.resize(start + static_cast<std::size_t>(c));
  std::size_t kept = start;
  const auto limit = static_cast<std::uint32_t>(c);
  for (std::size_t i = 0; i < static_cast<std::size_t>(n) && kept < out.size(); ++i) {
    if (place_at(places, i, width) >= limit) continue;
    std::memcpy(&out[kept], idx + i * 4, 4);
    ++kept;
  }
  EXDYNA_CHECK_T(DataError, kept == out.size(), "fused all-gather slot placed ", kept - start,
                 " indices below ", c, "; expected ", c);
  return static_cast<std::size_t>(c);
}

bool fused_pays(double allgather_seconds, double seconds_per_byte, double extra_bytes) {
  return extra_bytes * seconds_per_byte < allgather_seconds;
}

}  // namespace exdyna::sparsifiers
