// device_kernels.hpp's unpack_lists: the gathered selection of a fused all-gather, from every
// rank's slot and the planned counts in device memory (plan_counts' output), without the host. One
// block per rank: its offset in the list is the sum of the ranks before it (a rank with count 0
// sends its one index, as on the CPU), and its entries placed below its count are kept in slot
// (index) order by a block-wide scan of 0/1 flags, a tile of the block's width at a time, as
// unpack_fused keeps them, a count above the rank's list taking the list (resident_step.hpp;
// device_wire.hpp's FusedSlot reads the entries; device_wire_test.cpp holds its serial form to
// unpack_fused). The last block pads the list to k with the sentinel and writes the total, so the
// values' all-reduce always carries k.
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "exdyna/core/device_workspace.cuh"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"
#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"

namespace exdyna::sparsifiers::device {

using namespace core::device;  // NOLINT(google-build-using-namespace)

namespace {

constexpr int kUnpackThreads = 256;

// The entries rank j's list gives (resident_step.hpp's rule: its count, or its whole list where
// the count is more, the cap having yielded), or -1 where its slot or count is bad; *yielded
// set where the count was more.
__device__ std::int64_t kept_of(const UnpackShape& s, const std::int64_t* slots,
                                const std::int64_t* counts, int j, bool* yielded) {
  const rules::FusedSlot slot{slots + static_cast<std::size_t>(j) * s.slot_stride, s.head_words,
                              s.cap};
  const std::int64_t n = slot.count();
  const std::int64_t c = counts[j];
  if (n < 0 || c < 0) return -1;
  if (c > n) *yielded = true;
  return c < n ? c : n;
}

// What rank j adds to the list (kept_of, or its one index where that is 0), or -1 with the status
// in *status.
__device__ std::int64_t taken_by(const UnpackShape& s, const std::int64_t* slots,
                                 const std::int64_t* counts, int j, int* status, bool* yielded) {
  const std::int64_t c = kept_of(s, slots, counts, j, yielded);
  *status = c < 0 ? rules::kFusedCountBad : rules::kPlanOk;
  return c < 0 ? -1 : c == 0 ? 1 : c;
}

__global__ void unpack_kernel(UnpackShape s, const std::int64_t* slots, const std::int64_t* counts,
                              const std::uint32_t* one, std::uint32_t* idx, std::int64_t* result) {
  using Scan = cub::BlockScan<int, kUnpackThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ std::int64_t offset;
  __shared__ int bad;
  const int j = static_cast<int>(blockIdx.x);
  if (threadIdx.x == 0) {
    // This rank's place in the list; the last block also checks the others and closes the list.
    std::int64_t at = 0;
    int status = rules::kPlanOk, first_bad = -1;
    bool yielded = false;
    for (int i = 0; i < j && first_bad < 0; ++i) {
      const std::int64_t t = taken_by(s, slots, counts, i, &status, &yielded);
      if (t < 0) first_bad = i;
      at += t;
    }
    bad = first_bad >= 0;
    std::int64_t mine = 0;
    if (first_bad < 0) {
      mine = taken_by(s, slots, counts, j, &status, &yielded);
      if (mine < 0) first_bad = j;
      bad = first_bad >= 0 || at + mine > s.k;
    }
    offset = at;
    if (j == s.workers - 1) {
      if (first_bad < 0 && at + mine > s.k) status = rules::kListPastK;
      result[0] = first_bad < 0 && status == rules::kPlanOk ? at + mine : -1;
      result[1] = status == rules::kPlanOk && yielded ? rules::kFusedCapYielded : status;
      result[2] = first_bad;
      if (result[0] >= 0)
        for (std::int64_t i = result[0]; i < s.k; ++i) idx[i] = s.sentinel;
    }
  }
  __syncthreads();
  if (bad) return;
  bool yielded = false;
  const std::int64_t c = kept_of(s, slots, counts, j, &yielded);
  if (c == 0) {
    if (threadIdx.x == 0) idx[offset] = one[j];
    return;
  }
  const rules::FusedSlot slot{slots + static_cast<std::size_t>(j) * s.slot_stride, s.head_words,
                              s.cap};
  const std::int64_t n = slot.count();
  std::int64_t written = 0;  // the same in every thread: each tile's aggregate is broadcast
  for (std::int64_t base = 0; base < n && written < c; base += kUnpackThreads) {
    const std::int64_t i = base + threadIdx.x;
    const int keep =
        i < n && slot.place(static_cast<std::size_t>(i)) < static_cast<std::uint64_t>(c);
    int before = 0, in_tile = 0;
    Scan(scan).ExclusiveSum(keep, before, in_tile);
    if (keep) idx[offset + written + before] = slot.index(static_cast<std::size_t>(i));
    written += in_tile;
    __syncthreads();  // the scan's storage is reused by the next tile
  }
  if (threadIdx.x == 0 && written != c) result[3] = j + 1;  // unpack_fused's DataError
}

}  // namespace

void unpack_lists(Workspace& ws, const std::int64_t* d_slots, const UnpackShape& shape,
                  const std::int64_t* d_counts, const std::uint32_t* d_one, std::uint32_t* d_idx,
                  std::int64_t* d_result) {
  EXDYNA_CHECK_ARG(shape.workers >= 1 && shape.k >= 1 && shape.cap >= 1, "device unpack of ",
                   shape.workers, " slots with cap ", shape.cap, " and k = ", shape.k,
                   "; expected at least one worker, cap >= 1 and k >= 1");
  FusedLayout layout;
  layout.head_words = shape.head_words;
  layout.cap = shape.cap;
  EXDYNA_CHECK_ARG(shape.slot_stride >= layout.slot_words(), "device unpack: slots of ",
                   shape.slot_stride, " words; expected at least ", layout.slot_words(),
                   " for a cap of ", shape.cap);
  auto& w = ws.impl();
  TimedCall timed(w);
  EXDYNA_CUDA(cudaMemsetAsync(d_result + 3, 0, sizeof(std::int64_t), w.stream));
  EXDYNA_CUDA_LAUNCH(
      "unpack_kernel",
      unpack_kernel<<<static_cast<unsigned>(shape.workers), kUnpackThreads, 0, w.stream>>>(
          shape, d_slots, d_counts, d_one, d_idx, d_result));
  w.kernels_done();
}

}  // namespace exdyna::sparsifiers::device
