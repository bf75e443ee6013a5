// The ResidentStep of a CUDA device (resident_step.hpp): ExDyna's resident step as the kernels of
// sparsifiers/exdyna/device_kernels.hpp (pack_slot, plan_counts, unpack_lists, gather_listed,
// count_per_block_async) and the communicator's device collectives, all enqueued on the
// workspace's stream; the readback is one asynchronous copy into pinned host memory and an event,
// which wait_readback waits for. Built only where nvcc is found (with exdyna_cuda_kernels).
#pragma once

#include <vector>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/resident_step.hpp"

namespace exdyna::sparsifiers {

class CudaResidentStep final : public ResidentStep {
 public:
  explicit CudaResidentStep(core::device::Workspace& ws);
  ~CudaResidentStep() override;
  CudaResidentStep(const CudaResidentStep&) = delete;
  CudaResidentStep& operator=(const CudaResidentStep&) = delete;

  void pack_slot(const float* acc, std::int64_t begin, std::int64_t len,
                 const LadderGrid& floor_grid, int floor, const ResidentShape& shape) override;
  void allgather_slots(comm::Communicator& comm, const ResidentShape& shape) override;
  void plan_list(std::span<const Index> one, const ResidentShape& shape) override;
  void allreduce_values(const float* acc, comm::Communicator& comm,
                        const ResidentShape& shape) override;
  void count_per_block(const BlockLayout& layout) override;
  const Index* list() const override { return list_.data(); }
  const float* sums() const override { return sums_.data(); }
  void post_readback() override;
  Readback wait_readback() override;

 private:
  // Pinned host memory that grows, never shrinks (the readback's target and the staging of the
  // one-index table).
  struct Pinned {
    void* p = nullptr;
    std::size_t bytes = 0;
    void* get(std::size_t want);
  };
  core::device::Workspace& ws_;
  core::device::Buffer<std::int64_t> slot_, all_, pack_result_, plan_out_, unpack_result_;
  core::device::Buffer<Index> one_, list_;
  core::device::Buffer<float> sums_;
  core::device::Buffer<std::uint32_t> hits_;
  Pinned host_, staging_;
  void* event_ = nullptr;  // cudaEvent_t
  std::size_t slot_words_ = 0, n_hits_ = 0;
  int workers_ = 0;
  std::int64_t k_ = 0;
  bool counted_ = false, posted_ = false;
};

}  // namespace exdyna::sparsifiers
