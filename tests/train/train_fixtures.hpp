// What the training tests share: the tiny model on a small synthetic image dataset, whether a
// sparsifier is built in, and a run on in-process ranks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/train/trainer.hpp"

namespace exdyna::train::fixtures {

// n_train and n_test 8x8 one-channel images of `classes` classes (seeds 1 and 2).
inline DataBundle tiny_data(std::int64_t n_train, std::int64_t n_test, int classes = 4) {
  DataBundle b;
  b.train_images =
      std::make_shared<ImageDataset>(synthetic_image_dataset(n_train, classes, 1, 8, 8, 1));
  b.test_images =
      std::make_shared<ImageDataset>(synthetic_image_dataset(n_test, classes, 1, 8, 8, 2));
  return b;
}

// The tiny model on synthetic data at density 0.05: one epoch in batches of 16, quietly.
inline TrainOptions tiny_options(const std::string& sparsifier) {
  TrainOptions o;
  o.model = "tiny";
  o.dataset = "synthetic";
  o.sparsifier = sparsifier;
  o.sparse.density = 0.05;
  o.epochs = 1;
  o.batch_size = 16;
  o.progress = false;
  o.plots = false;
  return o;
}

// Whether this build registers the sparsifier (some are optional).
inline bool have(const std::string& name) {
  const auto names = sparsifiers::builtin_registry().names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// o trained on `world` in-process ranks: each rank's result, by rank.
inline std::vector<TrainResult> train_on_ranks(const TrainOptions& o, int world,
                                               const DataBundle& data) {
  std::vector<TrainResult> res(static_cast<std::size_t>(world));
  comm::run_local(world, [&](comm::Communicator& c) {
    res[static_cast<std::size_t>(c.rank())] = train_worker(o, c, &data);
  });
  return res;
}

}  // namespace exdyna::train::fixtures
