// The exchange shared by the sparsifiers whose workers select independently (Top-k, hard
// threshold, SIDCo): all-gather each worker's count, all-gather the index lists (padded or exact),
// take the union, all-reduce the values of acc at the union.
//
// Invariants: every rank ends with the same union, sorted ascending and without duplicates, and
// values[j] = sum over workers of acc_w[union[j]]. A worker may contribute an empty list (count 0);
// if every list is empty the union is empty and the all-reduce moves nothing, on every rank alike.
// Collectives, in this order on every rank: allgather_counts, allgather_list, allreduce_sum (or
// allreduce_sum_16 with 16-bit values).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sparsifiers {

// Buffers reused across steps: after the first steps of a run they stop growing.
struct ExchangeBuffers {
  std::vector<std::int64_t> mine_header;  // [count, riders...]
  std::vector<std::int64_t> headers;      // gathered headers, one row per rank
  std::vector<std::int64_t> counts;       // counts[r]
  std::vector<Index> gathered;            // the lists, concatenated in rank order
  std::vector<Index> merge_scratch;
  std::vector<std::size_t> run_bounds;
};

// mine: this worker's selected indices, each list sorted ascending without duplicates.
// riders: extra int64 fields each rank all-gathers along with its count (for example a bit-cast
// threshold); after the call, riders_of(bufs, r) gives rank r's. Fills out (sparse), and in stats
// k_per_worker, the count-derived fields (finish_counts), k_unique, times.allgather and
// times.allreduce.
void exchange_union(std::span<const float> acc, std::span<const Index> mine,
                    std::span<const std::int64_t> riders, comm::Communicator& comm,
                    comm::GatherMode mode, core::ValueFormat values, SparseResult& out,
                    StepStats& stats, ExchangeBuffers& bufs);

// The values' all-reduce every sparsifier ends with (--values): with kFp32, out.values summed as
// float32; with kFp16 or kBf16, each value rounded to the format on this rank before it is summed
// on the wire as 16-bit words (Communicator::allreduce_sum_16). Sets out.values_format, from which
// error feedback keeps acc - round(acc) in the residual at each sent index (error_feedback.hpp).
// Throws DataError if a value overflows fp16 (|value| >= 65520), naming it: the residual could not
// keep acc - Inf; bf16 has float32's range.
void allreduce_values(comm::Communicator& comm, core::ValueFormat values, SparseResult& out);

// Rank r's riders from the last exchange_union.
std::span<const std::int64_t> riders_of(const ExchangeBuffers& bufs, int r);

// exchange_union for the threshold estimators (SIDCo, Gaussian-k, DGC): this worker's threshold
// rides with its count, so every rank sets stats.threshold to the same mean over the workers.
void exchange_union_with_threshold(std::span<const float> acc, std::span<const Index> mine,
                                   double threshold, comm::Communicator& comm,
                                   comm::GatherMode mode, core::ValueFormat values,
                                   SparseResult& out, StepStats& stats, ExchangeBuffers& bufs);

// Union of `counts.size()` consecutive sorted lists (lists[0 .. counts[0]), then the next, ...),
// written sorted ascending without duplicates into out. Pairwise merges: O(total log lists).
void union_of_sorted_lists(std::span<const Index> lists, std::span<const std::int64_t> counts,
                           std::vector<Index>& out, std::vector<Index>& scratch,
                           std::vector<std::size_t>& bounds_scratch);

}  // namespace exdyna::sparsifiers
