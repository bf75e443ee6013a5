#include "exdyna/comm/engines/gloo_algorithms.hpp"

#include <gloo/allgatherv.h>
#include <gloo/transport/context.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace exdyna::comm {

namespace {

// Gloo's own collectives use slot prefixes 0x01..0x0f; Bruck's rounds live apart from them.
constexpr std::uint8_t kBruckSlotPrefix = 0x41;

void bruck_allgatherv(const std::shared_ptr<::gloo::Context>& ctx, std::uint32_t tag,
                      std::chrono::milliseconds timeout, const void* mine,
                      std::span<const std::size_t> sizes, void* out) {
  const int n = ctx->size, me = ctx->rank;
  const auto block = [&](int j) { return sizes[static_cast<std::size_t>((me + j) % n)]; };
  // held[j] starts the j-th block this rank holds: rank me + j's (mod n), in that order.
  std::vector<std::size_t> held(static_cast<std::size_t>(n) + 1, 0);
  for (int j = 0; j < n; ++j) held[static_cast<std::size_t>(j) + 1] = held[j] + block(j);
  std::vector<std::uint8_t> tmp(held.back());
  std::memcpy(tmp.data(), mine, block(0));
  auto buf = ctx->createUnboundBuffer(tmp.data(), tmp.size());
  const auto slot = ::gloo::Slot::build(kBruckSlotPrefix, tag);
  std::uint8_t round = 0;
  for (int d = 1; d < n; d *= 2, ++round) {
    // Holding d blocks, send the first m to rank me - d; rank me + d's first m are this rank's
    // blocks d .. d + m - 1. The two ranges never overlap (m <= d).
    const int m = std::min(d, n - d);
    const std::size_t send = held[static_cast<std::size_t>(m)];
    const std::size_t at = held[static_cast<std::size_t>(d)];
    const std::size_t recv = held[static_cast<std::size_t>(d + m)] - at;
    if (recv > 0) buf->recv((me + d) % n, slot + round, at, recv);
    if (send > 0) buf->send((me - d + n) % n, slot + round, 0, send);
    if (recv > 0) buf->waitRecv(timeout);
    if (send > 0) buf->waitSend(timeout);
  }
  // Undo the rotation: block j belongs to rank me + j.
  std::size_t pos = 0;
  std::vector<std::size_t> start(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) start[static_cast<std::size_t>(r)] = pos, pos += sizes[r];
  auto* o = static_cast<std::uint8_t*>(out);
  for (int j = 0; j < n; ++j)
    std::memcpy(o + start[static_cast<std::size_t>((me + j) % n)], tmp.data() + held[j], block(j));
}

}  // namespace

void set_wait_timeout(::gloo::Context& ctx, std::chrono::milliseconds timeout) {
  // The transport context is a protected member of gloo::Context, reached through a derived
  // class's pointer to member.
  struct Access : ::gloo::Context {
    static std::shared_ptr<::gloo::transport::Context>& transport(::gloo::Context& c) {
      return c.*(&Access::transportContext_);
    }
  };
  if (auto& t = Access::transport(ctx)) t->setTimeout(timeout);
}

const char* allreduce_name(GlooAlgorithm a) {
  return a == GlooAlgorithm::kRing ? "ring" : "bcube";
}
const char* allgather_name(GlooAlgorithm a) {
  return a == GlooAlgorithm::kRing ? "ring" : "bruck";
}

void gloo_allgatherv(const std::shared_ptr<::gloo::Context>& ctx, std::uint32_t tag,
                     std::chrono::milliseconds timeout, const void* mine,
                     std::span<const std::size_t> sizes, void* out, GlooAlgorithm a) {
  if (a == GlooAlgorithm::kLog) {
    bruck_allgatherv(ctx, tag, timeout, mine, sizes, out);
    return;
  }
  ::gloo::AllgathervOptions o(ctx);
  o.setTag(tag);
  o.setTimeout(timeout);
  o.setInput(static_cast<std::uint8_t*>(const_cast<void*>(mine)),
             sizes[static_cast<std::size_t>(ctx->rank)]);
  o.setOutput(static_cast<std::uint8_t*>(out),
              std::vector<std::size_t>(sizes.begin(), sizes.end()));
  ::gloo::allgatherv(o);
}

}  // namespace exdyna::comm
