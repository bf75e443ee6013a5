#include "exdyna/sparsifiers/cuda_device_step.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <numeric>

namespace exdyna::sparsifiers {

namespace dev = core::device;

float CudaDeviceStep::max_abs(const float* part, std::int64_t n) {
  return dev::max_abs(ws_, part, n);
}

std::int64_t CudaDeviceStep::select_threshold(const float* part, std::int64_t n, float thr,
                                              std::uint32_t offset) {
  mine_.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)));
  return device::select_threshold(ws_, part, n, thr, offset, mine_.data());
}

std::int64_t CudaDeviceStep::ladder_count(const float* part, std::int64_t n,
                                          const sparsifiers::LadderGrid& grid, std::int64_t* bins) {
  return device::ladder_count(ws_, part, n, grid, bins);
}

std::int64_t CudaDeviceStep::take_cut(const float* part, std::int64_t n, std::uint32_t offset,
                                      const sparsifiers::LadderGrid& grid, int rung,
                                      std::int64_t quota) {
  mine_.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)));
  return device::take_cut(ws_, part, n, offset, grid, rung, quota, mine_.data());
}

void CudaDeviceStep::select_one(Index i) {
  // The selection's buffer has room for its partition (at least one entry) already; a step that
  // selects nothing still ran its pass first.
  mine_.resize(std::max<std::size_t>(mine_.size(), 1));
  dev::copy_to_device(ws_, mine_.data(), &i, sizeof(i));
}

std::int64_t CudaDeviceStep::allgather_selection(std::int64_t mine,
                                                 std::span<const std::int64_t> counts,
                                                 comm::GatherMode mode, comm::Communicator& comm) {
  count_ = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  gathered_.resize(static_cast<std::size_t>(std::max<std::int64_t>(count_, 1)));
  EXDYNA_CHECK(mine == counts[static_cast<std::size_t>(comm.rank())], "device selection of ", mine,
               " indices but counts says ", counts[static_cast<std::size_t>(comm.rank())]);
  comm.allgather_list_device(mine_.data(), sizeof(Index), counts, mode, gathered_.data());
  dense_ = false;
  return count_;
}

void CudaDeviceStep::allreduce_values(const float* acc, comm::Communicator& comm) {
  sums_.resize(static_cast<std::size_t>(std::max<std::int64_t>(count_, 1)));
  dev::gather(ws_, acc, gathered_.data(), count_, sums_.data());
  comm.allreduce_sum_device(sums_.data(), static_cast<std::size_t>(count_));
}

void CudaDeviceStep::exchange_dense(const float* acc, std::int64_t n, comm::Communicator& comm) {
  sums_.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)));
  const auto err =
      cudaMemcpyAsync(sums_.data(), acc, static_cast<std::size_t>(n) * sizeof(float),
                      cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(ws_.stream()));
  EXDYNA_CHECK(err == cudaSuccess, "cudaMemcpyAsync (dense sums): ", cudaGetErrorString(err));
  comm.allreduce_sum_device(sums_.data(), static_cast<std::size_t>(n));
  count_ = 0;
  dense_ = true;
}

void CudaDeviceStep::count_per_block(const sparsifiers::BlockLayout& layout,
                                     std::span<std::uint32_t> hits) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(hits.size()) == layout.n_blocks, "block counts of ",
                   hits.size(), " entries; expected n_b = ", layout.n_blocks);
  device::count_per_block(ws_, gathered_.data(), count_, layout.block_size, layout.n_blocks,
                          hits.data());
}

}  // namespace exdyna::sparsifiers
