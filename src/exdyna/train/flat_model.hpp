// A worker's model with its parameters and gradients as views into two flat buffers (paper
// Alg. 1, step 1): backward writes the flat gradient buffer directly, and the optimizer and the
// checkpoints see one flat parameter buffer. Included only by torch translation units of the
// train layer.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/train/models.hpp"

namespace exdyna::train {

struct FlatModel {
  std::shared_ptr<Net> net;
  torch::Tensor flat_p, flat_g;
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> float_buffers;  // batch-norm running statistics
  std::int64_t n = 0;

  FlatModel(const ModelSpec& spec, std::uint64_t seed);
  std::span<float> p_span() { return {flat_p.data_ptr<float>(), static_cast<std::size_t>(n)}; }
  std::span<float> g_span() { return {flat_g.data_ptr<float>(), static_cast<std::size_t>(n)}; }
  // Backward must have accumulated into the views (autograd adds in place into a defined .grad);
  // if a future libtorch replaced them, the flat buffer would silently hold stale gradients.
  void check_grad_views();
  std::vector<float> get_buffers() const;
  void set_buffers(const std::vector<float>& v);
  // Batch-norm statistics differ per rank (each saw its own data): averages them, as DDP keeps
  // buffers in sync, so every rank evaluates the same model. Collective when there are buffers.
  void average_buffers(comm::Communicator& comm);
};

}  // namespace exdyna::train
