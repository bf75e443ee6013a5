// The two families of Gloo collectives the Gloo engine chooses between, on the process group's
// Gloo context: the ring (Gloo's default: W - 1 or more sequential rounds of small messages, the
// least per-byte cost on a long vector) and algorithms of log2 W rounds (Gloo's bcube all-reduce,
// recursive halving and doubling when W is a power of two; Bruck's all-gather), where a small
// message's cost is the number of rounds times the link's latency.
//
// Internal to the Gloo engine (needs Gloo's headers).
#pragma once

#include <gloo/allreduce.h>
#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace exdyna::comm {

enum class GlooAlgorithm { kRing, kLog };
const char* allreduce_name(GlooAlgorithm a);  // "ring" | "bcube"
const char* allgather_name(GlooAlgorithm a);  // "ring" | "bruck"

// Gloo's bcube waits without a timeout of its own, i.e. with the transport's default (the mesh
// set-up's, 30 s or more); this sets that default to the call's, so a dead peer ends it in time.
void set_wait_timeout(::gloo::Context& ctx, std::chrono::milliseconds timeout);

// In-place all-reduce of n elements with reduce (gloo::allreduce's contract). Every rank ends with
// the same bits on both algorithms: each element is reduced on one rank, then copied to the others.
template <typename T>
void gloo_allreduce(const std::shared_ptr<::gloo::Context>& ctx, std::uint32_t tag,
                    std::chrono::milliseconds timeout, T* data, std::size_t n,
                    const ::gloo::AllreduceOptions::Func& reduce, GlooAlgorithm a) {
  set_wait_timeout(*ctx, timeout);
  ::gloo::AllreduceOptions o(ctx);
  o.setTag(tag);
  o.setTimeout(timeout);
  o.setAlgorithm(a == GlooAlgorithm::kRing ? ::gloo::AllreduceOptions::Algorithm::RING
                                           : ::gloo::AllreduceOptions::Algorithm::BCUBE);
  o.setOutput(data, n);
  o.setReduceFunction(reduce);
  ::gloo::allreduce(o);
}

// All-gather of byte blocks of any size: rank r contributes sizes[r] bytes (every rank knows all
// sizes); out receives the blocks in rank order. kRing is gloo::allgatherv; kLog is Bruck's
// algorithm: in round k each rank sends what it holds (up to 2^k blocks) to rank - 2^k and
// receives as much from rank + 2^k, ceil(log2 W) rounds in all, the same bytes as the ring.
void gloo_allgatherv(const std::shared_ptr<::gloo::Context>& ctx, std::uint32_t tag,
                     std::chrono::milliseconds timeout, const void* mine,
                     std::span<const std::size_t> sizes, void* out, GlooAlgorithm a);

}  // namespace exdyna::comm
