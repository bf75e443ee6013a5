// device_kernels.hpp: BlockLayout::count_per_block (partition.cpp) on the device, for the gathered
// indices of one step: a histogram over the layout's blocks, in shared memory when the blocks fit
// (n_b = 1024 by default), else straight into device counters.
#include <cuda_runtime.h>

#include "exdyna/core/device_workspace.cuh"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_rules.hpp"

namespace exdyna::sparsifiers::device {

// The workspace and its helpers (core/device_workspace.cuh).
using namespace core::device;  // NOLINT(google-build-using-namespace)

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kSharedBlocks = 12 * 1024;  // 48 KiB of 32-bit counters

template <bool kShared>
__global__ __launch_bounds__(kThreads) void per_block_kernel(
    const std::uint32_t* __restrict__ idx, std::uint64_t m, std::uint64_t block_size,
    std::uint64_t n_blocks, std::uint64_t limit, unsigned int* __restrict__ hits) {
  extern __shared__ unsigned int local[];
  if constexpr (kShared) {
    for (std::uint64_t b = threadIdx.x; b < n_blocks; b += kThreads) local[b] = 0;
    __syncthreads();
  }
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t j = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; j < m;
       j += stride) {
    if (idx[j] >= limit) continue;  // a resident step's padding
    const std::uint64_t b = rules::block_of(idx[j], block_size, n_blocks);
    atomicAdd((kShared ? local : hits) + b, 1u);
  }
  if constexpr (kShared) {
    __syncthreads();
    for (std::uint64_t b = threadIdx.x; b < n_blocks; b += kThreads)
      if (local[b] != 0) atomicAdd(hits + b, local[b]);
  }
}

}  // namespace

namespace {

// The counts of the m indices below `limit` into d_hits (n_blocks device counters, cleared
// first), enqueued.
void count_enqueue(Workspace::Impl& w, const std::uint32_t* d_idx, std::int64_t m,
                   std::int64_t block_size, std::int64_t n_blocks, std::uint64_t limit,
                   unsigned int* d_hits) {
  const auto nb = static_cast<std::size_t>(n_blocks);
  EXDYNA_CUDA(cudaMemsetAsync(d_hits, 0, sizeof(unsigned int) * nb, w.stream));
  if (m == 0) return;
  const auto um = static_cast<std::uint64_t>(m);
  const auto bs = static_cast<std::uint64_t>(block_size);
  const auto un = static_cast<std::uint64_t>(n_blocks);
  if (n_blocks <= kSharedBlocks) {
    // Fewer blocks of the grid than one per 8 k indices: each block's clearing and adding of its
    // counters stays small against its share of the indices.
    const unsigned blocks = grid_for(w, um, 8192, 2);
    EXDYNA_CUDA_LAUNCH("count_per_block", per_block_kernel<true>
                       <<<blocks, kThreads, sizeof(unsigned int) * nb, w.stream>>>(
                           d_idx, um, bs, un, limit, d_hits));
  } else {
    const unsigned blocks = grid_for(w, um, kThreads, 8);
    EXDYNA_CUDA_LAUNCH("count_per_block", per_block_kernel<false>
                       <<<blocks, kThreads, 0, w.stream>>>(d_idx, um, bs, un, limit, d_hits));
  }
}

void check_blocks(std::int64_t m, std::int64_t block_size, std::int64_t n_blocks) {
  check_size(m, "count_per_block");
  EXDYNA_CHECK_ARG(block_size >= 1 && n_blocks >= 1, "count_per_block: ", n_blocks, " blocks of ",
                   block_size, " elements; expected both >= 1");
}

}  // namespace

void count_per_block(Workspace& ws, const std::uint32_t* d_idx, std::int64_t m,
                     std::int64_t block_size, std::int64_t n_blocks, std::uint32_t* h_hits) {
  check_blocks(m, block_size, n_blocks);
  if (m == 0) return;
  auto& w = ws.impl();
  TimedCall timed(w);
  const auto nb = static_cast<std::size_t>(n_blocks);
  auto* d_hits = w.small.as<unsigned int>(nb);
  count_enqueue(w, d_idx, m, block_size, n_blocks, ~0ull, d_hits);
  w.kernels_done();
  auto* h = w.host.as<unsigned int>(nb);
  EXDYNA_CUDA(
      cudaMemcpyAsync(h, d_hits, sizeof(unsigned int) * nb, cudaMemcpyDeviceToHost, w.stream));
  w.sync();
  for (std::size_t b = 0; b < nb; ++b) h_hits[b] += h[b];
}

void count_per_block_async(Workspace& ws, const std::uint32_t* d_idx, std::int64_t m,
                           std::int64_t limit, std::int64_t block_size, std::int64_t n_blocks,
                           std::uint32_t* d_hits) {
  check_blocks(m, block_size, n_blocks);
  auto& w = ws.impl();
  TimedCall timed(w);
  count_enqueue(w, d_idx, m, block_size, n_blocks, static_cast<std::uint64_t>(limit), d_hits);
  w.kernels_done();
}

}  // namespace exdyna::sparsifiers::device
