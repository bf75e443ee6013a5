#include "exdyna/sparsifiers/exdyna/ladder_wire.hpp"

#include <algorithm>
#include <limits>

#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers {

namespace {

constexpr std::uint64_t kMaxToken = std::numeric_limits<std::uint64_t>::max();

int varint_bytes(std::uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Token of a non-empty bin (2c) and of a run of z empty bins (2z + 1).
std::uint64_t bin_token(std::int64_t c) {
  EXDYNA_CHECK_ARG(c >= 1 && static_cast<std::uint64_t>(c) <= kMaxToken / 2, "ladder bin of ", c,
                   " values cannot be encoded");
  return static_cast<std::uint64_t>(c) << 1;
}
std::uint64_t run_token(std::int64_t z) {
  return (static_cast<std::uint64_t>(z) << 1) | 1u;
}

// Bytes written into the slot's words, little-endian within each word.
class SlotWriter {
 public:
  explicit SlotWriter(std::span<std::int64_t> slot) : slot_(slot) {
    std::fill(slot_.begin(), slot_.end(), 0);
  }
  std::size_t left() const { return 8 * slot_.size() - pos_; }
  void put(std::uint64_t v) {
    do {
      const auto byte = static_cast<std::uint64_t>(v & 0x7f) | (v >= 0x80 ? 0x80u : 0u);
      auto& w = slot_[pos_ / 8];
      w = static_cast<std::int64_t>(static_cast<std::uint64_t>(w) | byte << (8 * (pos_ % 8)));
      ++pos_;
      v >>= 7;
    } while (v != 0);
  }

 private:
  std::span<std::int64_t> slot_;
  std::size_t pos_ = 0;
};

class SlotReader {
 public:
  explicit SlotReader(std::span<const std::int64_t> slot) : slot_(slot) {}
  bool at_end() const { return pos_ == 8 * slot_.size(); }
  // The next varint; throws when the slot ends inside it.
  std::uint64_t get() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      EXDYNA_CHECK_T(DataError, !at_end(), "ladder slot ends inside a number");
      const std::uint64_t byte = next_byte();
      EXDYNA_CHECK_T(DataError, shift < 64 && (shift < 63 || (byte & 0x7e) == 0),
                     "ladder slot holds a number of more than 64 bits");
      v |= (byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
  }

 private:
  std::uint64_t next_byte() {
    const auto w = static_cast<std::uint64_t>(slot_[pos_ / 8]);
    const std::uint64_t b = (w >> (8 * (pos_ % 8))) & 0xff;
    ++pos_;
    return b;
  }
  std::span<const std::int64_t> slot_;
  std::size_t pos_ = 0;
};

}  // namespace

std::size_t ladder_wire_bytes(std::int64_t count, std::span<const std::int64_t> bins) {
  EXDYNA_CHECK_ARG(count >= 0, "ladder count ", count, "; expected >= 0");
  std::size_t bytes = static_cast<std::size_t>(varint_bytes(static_cast<std::uint64_t>(count)));
  std::int64_t zeros = 0;
  for (std::size_t j = bins.size(); j-- > 0;) {
    EXDYNA_CHECK_ARG(bins[j] >= 0, "ladder bin ", j, " holds ", bins[j], "; expected >= 0");
    if (bins[j] == 0) {
      ++zeros;
      continue;
    }
    if (zeros > 0) bytes += static_cast<std::size_t>(varint_bytes(run_token(zeros)));
    bytes += static_cast<std::size_t>(varint_bytes(bin_token(bins[j])));
    zeros = 0;
  }
  return bytes;
}

int encode_ladder(std::int64_t count, std::span<const std::int64_t> bins,
                  std::span<std::int64_t> slot) {
  EXDYNA_CHECK_ARG(count >= 0, "ladder count ", count, "; expected >= 0");
  for (std::size_t j = 0; j < bins.size(); ++j)
    EXDYNA_CHECK_ARG(bins[j] >= 0, "ladder bin ", j, " holds ", bins[j], "; expected >= 0");
  SlotWriter out(slot);
  const auto count_bytes =
      static_cast<std::size_t>(varint_bytes(static_cast<std::uint64_t>(count)));
  EXDYNA_CHECK_ARG(count_bytes <= out.left(), "a ladder slot of ", slot.size(),
                   " words cannot hold the count ", count);
  out.put(static_cast<std::uint64_t>(count));
  std::int64_t zeros = 0;
  for (std::size_t j = bins.size(); j-- > 0;) {
    if (bins[j] == 0) {
      ++zeros;
      continue;
    }
    const std::uint64_t run = zeros > 0 ? run_token(zeros) : 0;
    const std::uint64_t tok = bin_token(bins[j]);
    const auto need =
        static_cast<std::size_t>((zeros > 0 ? varint_bytes(run) : 0) + varint_bytes(tok));
    // Rungs below the last bin that fits read as empty; those above it are all held.
    if (need > out.left()) return static_cast<int>(j) + 1;
    if (zeros > 0) out.put(run);
    out.put(tok);
    zeros = 0;
  }
  return 0;  // the empty rungs at the bottom need no bytes
}

void decode_ladder(std::span<const std::int64_t> slot, std::int64_t& count,
                   std::span<std::int64_t> bins) {
  SlotReader in(slot);
  const std::uint64_t c = in.get();
  EXDYNA_CHECK_T(DataError,
                 c <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                 "ladder slot holds a count of ", c, "; expected one that fits 63 bits");
  count = static_cast<std::int64_t>(c);
  std::fill(bins.begin(), bins.end(), 0);
  auto j = static_cast<std::int64_t>(bins.size()) - 1;  // the next rung, from the top down
  while (!in.at_end()) {
    const std::uint64_t tok = in.get();
    if (tok == 0) break;  // the end of the stream
    const std::uint64_t n = tok >> 1;
    const bool run = (tok & 1u) != 0;
    EXDYNA_CHECK_T(DataError, j >= 0 && (!run || n <= static_cast<std::uint64_t>(j + 1)),
                   "ladder slot describes more than the ladder's ", bins.size(), " rungs");
    if (run) {
      j -= static_cast<std::int64_t>(n);
    } else {
      bins[static_cast<std::size_t>(j)] = static_cast<std::int64_t>(n);
      --j;
    }
  }
}

}  // namespace exdyna::sparsifiers
