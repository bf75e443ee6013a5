// Image datasets in memory (uint8 pixels, int labels) and the per-epoch sharding of samples over
// workers. Torch-free: the trainer turns batches into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exdyna/core/hash.hpp"

namespace exdyna::train {

enum class DatasetKind { kFashionMnist, kMnist, kCifar10, kCifar100, kSynthetic };
const char* to_string(DatasetKind k);
DatasetKind parse_dataset(
    const std::string& s);  // fashion-mnist | mnist | cifar10 | cifar100 | synthetic

struct ImageDataset {
  std::string name;
  int channels = 1, height = 28, width = 28;
  int num_classes = 10;
  std::vector<std::uint8_t> pixels;  // [n][c][h][w]
  std::vector<std::int32_t> labels;  // [n]
  // Per-channel normalisation applied to pixel / 255.
  std::vector<float> mean, stddev;
  // Random 4-pixel-padded crop and horizontal flip when training (CIFAR).
  bool augment = false;
  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
  std::int64_t sample_bytes() const { return std::int64_t{channels} * height * width; }
};

// Where a dataset lives when --data-dir is not given (Debian's package path where one exists).
std::string default_data_dir(DatasetKind k);

// Loads the train or test split. Throws DataError: a missing dataset names the Debian package to
// install (where one exists) and the --data-dir flag; truncated or corrupt files name the file.
ImageDataset load_image_dataset(DatasetKind k, const std::string& dir, bool train);

// A learnable synthetic set (class-specific patterns plus noise), for tests and smoke runs.
ImageDataset synthetic_image_dataset(std::int64_t n, int classes, int channels, int height,
                                     int width, std::uint64_t seed);

// The samples worker `rank` of `world` visits in `epoch`: a permutation of [0, n) drawn from
// (seed, epoch) — identical on every worker — dealt round-robin, so shards are disjoint and equal
// in size (the n mod world leftover samples sit out that epoch; which ones changes every epoch).
std::vector<std::int64_t> epoch_shard(std::int64_t n, int world, int rank, std::uint64_t seed,
                                      std::int64_t epoch);

// Shuffles and draws use core's SplitMix64, so they are identical on every platform.
using core::SplitMix64;

// A seed mixed from several values, for stateless per-(epoch, rank, step) streams.
std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0, std::uint64_t d = 0);

}  // namespace exdyna::train
