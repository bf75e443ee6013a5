// The DeviceStep of a CUDA device: ExDyna's passes as the kernels of
// sparsifiers/exdyna/device_kernels.hpp, the exchange through the communicator's device
// collectives. Built only where nvcc is found (with exdyna_cuda_kernels); the sparsifiers see only
// device_step.hpp.
#pragma once

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/sparsifiers/device_step.hpp"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"

namespace exdyna::sparsifiers {

class CudaDeviceStep final : public DeviceStep {
 public:
  // Every call enqueues on ws's stream (and the calls that return counts synchronize it).
  explicit CudaDeviceStep(core::device::Workspace& ws) : ws_(ws) {}

  float max_abs(const float* part, std::int64_t n) override;
  std::int64_t select_threshold(const float* part, std::int64_t n, float thr,
                                std::uint32_t offset) override;
  std::int64_t ladder_count(const float* part, std::int64_t n, const sparsifiers::LadderGrid& grid,
                            std::int64_t* bins) override;
  std::int64_t take_cut(const float* part, std::int64_t n, std::uint32_t offset,
                        const sparsifiers::LadderGrid& grid, int rung, std::int64_t quota) override;
  void select_one(Index i) override;
  std::int64_t allgather_selection(std::int64_t mine, std::span<const std::int64_t> counts,
                                   comm::GatherMode mode, comm::Communicator& comm) override;
  void allreduce_values(const float* acc, comm::Communicator& comm) override;
  void exchange_dense(const float* acc, std::int64_t n, comm::Communicator& comm) override;
  std::int64_t gathered_count() const override { return count_; }
  const Index* gathered() const override { return gathered_.data(); }
  const float* sums() const override { return sums_.data(); }
  bool dense() const override { return dense_; }
  void count_per_block(const sparsifiers::BlockLayout& layout,
                       std::span<std::uint32_t> hits) override;

 private:
  core::device::Workspace& ws_;
  core::device::Buffer<Index> mine_, gathered_;
  core::device::Buffer<float> sums_;
  std::int64_t count_ = 0;
  bool dense_ = false;
};

}  // namespace exdyna::sparsifiers
