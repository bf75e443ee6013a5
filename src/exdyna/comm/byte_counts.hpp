// The bytes each collective moved, as one rank counts them; the communicator keeps the totals.
#pragma once

#include <cstdint>

namespace exdyna::comm {

// Logical payload of each collective as seen by one rank, in bytes: for an all-gather the size of
// the gathered buffer (with padding in padded mode), for an all-reduce or broadcast the buffer
// size. With this accounting, padded index bytes / exact index bytes = f(t) (paper Eq. 5).
struct ByteCounts {
  std::uint64_t allgather_counts = 0;   // all-gather of per-rank counts (and anything riding along)
  std::uint64_t allgather_indices = 0;  // all-gather of index lists (padded or exact)
  std::uint64_t allreduce = 0;          // all-reduce of values
  std::uint64_t broadcast = 0;          // broadcast (CLT-k's leader indices)
  std::uint64_t alltoall = 0;           // all-to-all lists, the part sent to other ranks (Ok-Topk)
  std::uint64_t padded_elements = 0;    // elements of padding sent by padded all-gathers
  // Collective calls (not bytes): each costs at least one latency-bound round of the engine's
  // algorithm, which is what a small sparse step pays for (docs/compare.md).
  std::uint64_t collectives = 0;
  std::uint64_t total() const {
    return allgather_counts + allgather_indices + allreduce + broadcast + alltoall;
  }
  ByteCounts& operator+=(const ByteCounts& o) {
    allgather_counts += o.allgather_counts;
    allgather_indices += o.allgather_indices;
    allreduce += o.allreduce;
    broadcast += o.broadcast;
    alltoall += o.alltoall;
    padded_elements += o.padded_elements;
    collectives += o.collectives;
    return *this;
  }
  friend ByteCounts operator-(ByteCounts a, const ByteCounts& b) {
    a.allgather_counts -= b.allgather_counts;
    a.allgather_indices -= b.allgather_indices;
    a.allreduce -= b.allreduce;
    a.broadcast -= b.broadcast;
    a.alltoall -= b.alltoall;
    a.padded_elements -= b.padded_elements;
    a.collectives -= b.collectives;
    return a;
  }
};

}  // namespace exdyna::comm
