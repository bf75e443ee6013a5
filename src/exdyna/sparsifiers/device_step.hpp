// A step whose gradient lives in device memory (a CUDA bucket from PyTorch). The sparsifiers that
// run there (ExDyna in paper and exact mode, dense) take their decisions on the host, from small
// counts, exactly as on the CPU; every pass that reads the gradient, and every buffer that
// travels, goes through this interface instead. Its one implementation wraps the CUDA kernels of
// core/ and sparsifiers/exdyna/device_kernels.hpp (sparsifiers/cuda_device_step.cpp, built only
// where nvcc is found), so this header and the sparsifiers that call it build without CUDA.
//
// Only counts cross to the host: the ladder's bins, k per worker, block counts, a maximum. The
// gradient, the indices and the values stay on the device.
#pragma once

#include <cstdint>
#include <span>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

class DeviceStep {
 public:
  virtual ~DeviceStep() = default;

  // The passes over one partition (device pointer `part` of n values; indices offset + i), with
  // the semantics of their CPU counterparts in sparsifiers/exdyna/selection.hpp and
  // sparsifiers/exdyna/ladder_cut.hpp.
  virtual float max_abs(const float* part, std::int64_t n) = 0;
  // sparsifiers::select_threshold into this worker's selection (selection()); returns the count.
  virtual std::int64_t select_threshold(const float* part, std::int64_t n, float thr,
                                        std::uint32_t offset) = 0;
  // sparsifiers::count_ladder_candidates: returns the candidates; bins (grid.rungs host entries)
  // added.
  virtual std::int64_t ladder_count(const float* part, std::int64_t n,
                                    const sparsifiers::LadderGrid& grid, std::int64_t* bins) = 0;
  // sparsifiers::take_cut of the grid's candidates into this worker's selection; returns the count.
  virtual std::int64_t take_cut(const float* part, std::int64_t n, std::uint32_t offset,
                                const sparsifiers::LadderGrid& grid, int rung,
                                std::int64_t quota) = 0;
  // The selection becomes exactly {i} (the one index a worker with nothing sends).
  virtual void select_one(Index i) = 0;

  // Alg. 1 lines 12-13 on the device: all-gathers this worker's selection (`mine` indices; every
  // rank's count in counts) in rank order and returns how many were gathered; then all-reduces
  // acc at the gathered indices. gathered() and sums() hold them until the next exchange.
  virtual std::int64_t allgather_selection(std::int64_t mine, std::span<const std::int64_t> counts,
                                           comm::GatherMode mode, comm::Communicator& comm) = 0;
  virtual void allreduce_values(const float* acc, comm::Communicator& comm) = 0;
  // The dense all-reduce: sums() holds the n sums of acc over the ranks.
  virtual void exchange_dense(const float* acc, std::int64_t n, comm::Communicator& comm) = 0;
  virtual std::int64_t gathered_count() const = 0;
  virtual const Index* gathered() const = 0;
  virtual const float* sums() const = 0;
  virtual bool dense() const = 0;  // whether the last exchange was exchange_dense

  // BlockLayout::count_per_block of the last gathered indices (hits: host, added to).
  virtual void count_per_block(const sparsifiers::BlockLayout& layout,
                               std::span<std::uint32_t> hits) = 0;
};

}  // namespace exdyna::sparsifiers
