// The fields that identify a training configuration, in one place for both of its uses: the
// startup check that every rank agrees (`exdyna train`, before the first step) and a checkpoint's
// fingerprint (a resume under another configuration is refused, naming the field). Fields that a
// resume may change (epochs, --max-steps, the learning rate, output options) are not in it: the
// command adds those to its startup check only. Torch-free.
#pragma once

#include <cstdint>

#include "exdyna/comm/fingerprint.hpp"
#include "exdyna/train/trainer.hpp"

namespace exdyna::train {

// model, dataset, sparsifier and its configuration, batch size, seed.
comm::Fingerprint train_fingerprint(const TrainOptions& o);

// A checkpoint's fingerprint: train_fingerprint plus the model's n_g, serialised.
std::string checkpoint_fingerprint(const TrainOptions& o, std::int64_t n_g);

}  // namespace exdyna::train
