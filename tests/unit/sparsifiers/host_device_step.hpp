// A DeviceStep over host memory: the CPU kernels of core/ behind the GPU path's interface, so the
// unit tests can hold ExDyna's step_device (what runs on a CUDA bucket) to step()'s decisions on
// any machine. The GPU's own DeviceStep (sparsifiers/cuda_device_step.cpp) is held to these same
// kernels by exdyna_cuda_check on a GPU.
#pragma once

#include <vector>

#include "exdyna/core/reductions.hpp"
#include "exdyna/sparsifiers/device_step.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"

namespace exdyna::test {

class HostDeviceStep final : public sparsifiers::DeviceStep {
 public:
  using Index = sparsifiers::Index;

  float max_abs(const float* part, std::int64_t n) override {
    return core::max_abs(std::span<const float>(part, static_cast<std::size_t>(n)));
  }
  std::int64_t select_threshold(const float* part, std::int64_t n, float thr,
                                std::uint32_t offset) override {
    mine_.resize(static_cast<std::size_t>(n) + 1);
    return static_cast<std::int64_t>(
        sparsifiers::select_threshold(span(part, n), thr, offset, mine_.data()));
  }
  std::int64_t ladder_count(const float* part, std::int64_t n, const sparsifiers::LadderGrid& grid,
                            std::int64_t* bins) override {
    bytes_.resize(static_cast<std::size_t>(n) + 64);
    return static_cast<std::int64_t>(
        sparsifiers::count_ladder_candidates(span(part, n), grid, bins, bytes_.data()));
  }
  std::int64_t take_cut(const float* part, std::int64_t n, std::uint32_t offset,
                        const sparsifiers::LadderGrid& grid, int rung,
                        std::int64_t quota) override {
    mine_.resize(static_cast<std::size_t>(n) + 1);
    abs_.resize(static_cast<std::size_t>(n) + 1);
    std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
    const auto c = sparsifiers::collect_ladder_candidates(span(part, n), offset, grid, mine_.data(),
                                                          abs_.data(), bins.data());
    return static_cast<std::int64_t>(
        sparsifiers::take_cut(mine_.data(), abs_.data(), c, grid, rung, quota));
  }
  void select_one(Index i) override {
    mine_.resize(std::max<std::size_t>(mine_.size(), 1));
    mine_[0] = i;
  }
  std::int64_t allgather_selection(std::int64_t mine, std::span<const std::int64_t> counts,
                                   comm::GatherMode mode, comm::Communicator& comm) override {
    comm.allgather_list<Index>(std::span<const Index>(mine_.data(), static_cast<std::size_t>(mine)),
                               counts, mode, gathered_);
    dense_ = false;
    return gathered_count();
  }
  void allreduce_values(const float* acc, comm::Communicator& comm) override {
    sums_.resize(gathered_.size());
    for (std::size_t j = 0; j < gathered_.size(); ++j) sums_[j] = acc[gathered_[j]];
    comm.allreduce_sum(std::span<float>(sums_));
  }
  void exchange_dense(const float* acc, std::int64_t n, comm::Communicator& comm) override {
    sums_.assign(acc, acc + n);
    comm.allreduce_sum(std::span<float>(sums_));
    gathered_.clear();
    dense_ = true;
  }
  std::int64_t gathered_count() const override {
    return static_cast<std::int64_t>(gathered_.size());
  }
  const Index* gathered() const override { return gathered_.data(); }
  const float* sums() const override { return sums_.data(); }
  bool dense() const override { return dense_; }
  void count_per_block(const sparsifiers::BlockLayout& layout,
                       std::span<std::uint32_t> hits) override {
    layout.count_per_block(gathered_, hits);
  }

 private:
  static std::span<const float> span(const float* p, std::int64_t n) {
    return {p, static_cast<std::size_t>(n)};
  }
  std::vector<Index> mine_, gathered_;
  std::vector<float> abs_, sums_;
  std::vector<std::uint8_t> bytes_;
  bool dense_ = false;
};

}  // namespace exdyna::test
