// Training and test batches as tensors: normalised (and, where the dataset asks for it, augmented)
// image batches, and a worker's language-model shard cut into bptt-long chunks. Every random choice
// is a pure function of (seed, epoch, rank, step), so a step number is the whole data position.
// Included only by torch translation units of the train layer.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <span>
#include <vector>

#include "exdyna/train/trainer.hpp"

namespace exdyna::train {

// Builds a normalised (and, for training sets that ask for it, augmented) batch of images.
torch::Tensor image_batch(const ImageDataset& d, std::span<const std::int64_t> idx, bool train,
                          std::uint64_t seed, torch::Tensor& labels);

// A language-model worker's view of the training stream: its contiguous shard laid out as
// batch_size rows (the classic "batchify"), cut into bptt-long chunks visited in a per-epoch
// shuffled order.
struct LmShard {
  std::vector<std::int32_t> rows;  // [B][row_len]
  std::int64_t B = 0, row_len = 0, bptt = 0;
  std::int64_t chunks() const { return (row_len - 1) / bptt; }
};

// The training batches of worker `rank` of `world`, step by step: its epoch shard of the images
// (datasets.hpp: epoch_shard) or its language-model shard. Steps per epoch are equal on every rank
// (equal shards).
class BatchSource {
 public:
  // Throws InvalidArgument when a worker's shard holds no whole batch.
  BatchSource(const TrainOptions& opts, const DataBundle& data, int world, int rank);
  std::int64_t steps_per_epoch() const { return spe_; }
  // The inputs of global step `step` (counting resumed steps); the targets go into y.
  torch::Tensor batch(std::int64_t step, torch::Tensor& y);

 private:
  const TrainOptions& opts_;
  const DataBundle& data_;
  int world_, rank_;
  LmShard lms_;
  std::int64_t spe_ = 0;
  std::vector<std::int64_t> order_;  // this epoch's visiting order
  std::int64_t order_epoch_ = -1;
};

}  // namespace exdyna::train
