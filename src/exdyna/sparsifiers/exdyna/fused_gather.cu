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
#include <cub/device/device_radix_sort.cuh>
#include <limits>

#include "exdyna/core/device_workspace.cuh"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_plan.hpp"
#include "exdyna/sparsifiers/exdyna/device_rules.hpp"
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

// pack_slot, after the count pass: L = min(count, cap), the own cut of L on the full ladder (its
// rung in the grid from the floor), and L into the slot.
__global__ void pack_prep_kernel(const std::int64_t* bins, int rungs, int floor, std::int64_t cap,
                                 std::int64_t* result, std::int64_t* rung_quota,
                                 std::int64_t* slot_l) {
  const std::int64_t list = result[0] < cap ? result[0] : cap;
  int cut = 0;
  std::int64_t quota = 0;
  result[1] = list;
  result[2] = rules::own_cut_form(bins, rungs, list, &cut, &quota);
  rung_quota[0] = cut > floor ? cut - floor : 0;
  rung_quota[1] = quota;
  *slot_l = list;
}

// The cut's order of the kept candidates (take_cut's, in index order): larger key first, then the
// lower index; the entries past L sort last.
__global__ void order_keys_kernel(const float* acc, const std::uint32_t* idx,
                                  const std::uint32_t* kept, std::int64_t* result, std::int64_t cap,
                                  std::uint32_t lo_key, int mant_bits, int rungs,
                                  unsigned long long* keys) {
  const std::int64_t list = result[1];
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i == 0 && static_cast<std::int64_t>(*kept) != list)
    result[6] = rules::kFusedPlacesShort;  // the cut kept other than L
  if (i >= cap) return;
  // Past what the cut kept (it failed: the status above, read one step late) idx holds nothing.
  if (i >= list || i >= static_cast<std::int64_t>(*kept)) {
    keys[i] = ~0ull;
    return;
  }
  const std::uint32_t key = rules::order_key(fabsf(acc[idx[i]]), lo_key, mant_bits, rungs);
  keys[i] = static_cast<unsigned long long>(~key) << 32 | static_cast<unsigned long long>(i);
}

// Each kept candidate's index and place (its position in the sorted order) into the slot's
// areas, as pack_fused lays them out (little-endian, 4-byte indices, 2- or 4-byte places).
__global__ void place_kernel(const unsigned long long* sorted, const std::uint32_t* idx,
                             const std::int64_t* result, std::int64_t cap,
                             std::uint32_t* index_area, void* place_area, int place_bytes) {
  const std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= cap || p >= result[1] || sorted[p] == ~0ull) return;  // ~0: an entry the cut lacked
  const auto i = static_cast<std::uint32_t>(sorted[p] & 0xffffffffu);
  index_area[i] = idx[i];
  if (place_bytes == 2)
    static_cast<std::uint16_t*>(place_area)[i] = static_cast<std::uint16_t>(p);
  else
    static_cast<std::uint32_t*>(place_area)[i] = static_cast<std::uint32_t>(p);
}

}  // namespace

void pack_slot(Workspace& ws, const float* d_acc, const PackShape& s, std::int64_t* d_slot,
               std::int64_t* d_result) {
  EXDYNA_CHECK_ARG(s.cap >= 1 && s.floor >= 0 && s.floor + s.floor_grid.rungs == s.rungs &&
                       s.ladder_words >= 1 && s.ladder_words <= s.head_words,
                   "device pack of a slot with cap ", s.cap, ", floor ", s.floor, " of ", s.rungs,
                   " rungs (", s.floor_grid.rungs, " from the floor), ", s.ladder_words,
                   " ladder words in a head of ", s.head_words,
                   "; expected cap >= 1, floor + rungs from it = rungs, 1 <= ladder words <= head");
  FusedLayout layout;
  layout.head_words = s.head_words;
  layout.cap = s.cap;
  auto& w = ws.impl();
  const std::size_t cap = static_cast<std::size_t>(s.cap);
  // Scratch: the full ladder and the cut's rung and quota (int64), the candidates kept (len + 1),
  // their count, and the sort's keys, in and out; then cub's temporary storage.
  std::size_t temp_bytes = 0;
  EXDYNA_CUDA(cub::DeviceRadixSort::SortKeys(
      nullptr, temp_bytes, static_cast<const unsigned long long*>(nullptr),
      static_cast<unsigned long long*>(nullptr), static_cast<std::int64_t>(cap), 0, 64, w.stream));
  const std::size_t words = static_cast<std::size_t>(s.rungs) + 2 + 2 * cap +
                            (static_cast<std::size_t>(s.len) + 2 + 1) / 2 + 1;
  auto* base = static_cast<std::int64_t*>(w.pack.get(words * 8 + temp_bytes + 256));
  std::int64_t* d_bins = base;
  std::int64_t* d_rq = d_bins + s.rungs;
  auto* d_keys_in = reinterpret_cast<unsigned long long*>(d_rq + 2);
  unsigned long long* d_keys_out = d_keys_in + cap;
  auto* d_idx = reinterpret_cast<std::uint32_t*>(d_keys_out + cap);
  std::uint32_t* d_kept = d_idx + s.len + 1;
  void* d_temp = base + words;

  EXDYNA_CUDA(cudaMemsetAsync(d_slot, 0, layout.slot_words() * 8, w.stream));
  EXDYNA_CUDA(cudaMemsetAsync(d_bins, 0, static_cast<std::size_t>(s.rungs) * 8, w.stream));
  EXDYNA_CUDA(cudaMemsetAsync(d_result, 0, 7 * 8, w.stream));
  const float* d_part = d_acc + s.offset;
  ladder_count_async(ws, d_part, s.len, s.floor_grid, d_bins + s.floor, d_result);
  EXDYNA_CUDA_LAUNCH("pack_prep_kernel",
                     pack_prep_kernel<<<1, 1, 0, w.stream>>>(
                         d_bins, s.rungs, s.floor, s.cap, d_result, d_rq, d_slot + s.head_words));
  encode_slot(ws, d_result, d_bins, s.rungs, d_slot, s.ladder_words, d_result + 4);
  take_cut_async(ws, d_part, s.len, s.offset, s.floor_grid, d_rq, d_idx, d_kept, d_result + 3);
  const unsigned blocks = static_cast<unsigned>((cap + 255) / 256);
  EXDYNA_CUDA_LAUNCH("order_keys_kernel",
                     order_keys_kernel<<<blocks, 256, 0, w.stream>>>(
                         d_acc, d_idx, d_kept, d_result, s.cap, s.floor_grid.lo_key,
                         s.floor_grid.mant_bits, s.floor_grid.rungs, d_keys_in));
  // d_idx holds absolute indices (offset + i): acc, not the partition, is what they index.
  EXDYNA_CUDA(cub::DeviceRadixSort::SortKeys(d_temp, temp_bytes, d_keys_in, d_keys_out,
                                             static_cast<std::int64_t>(cap), 0, 64, w.stream));
  auto* index_area = reinterpret_cast<std::uint32_t*>(d_slot + s.head_words + 1);
  void* place_area = d_slot + s.head_words + 1 + layout.index_words();
  EXDYNA_CUDA_LAUNCH("place_kernel", place_kernel<<<blocks, 256, 0, w.stream>>>(
                                         d_keys_out, d_idx, d_result, s.cap, index_area, place_area,
                                         static_cast<int>(layout.place_bytes())));
  w.kernels_done();
}

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
