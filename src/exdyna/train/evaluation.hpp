// Evaluation on the test split, shared out over the ranks. Included only by torch translation
// units of the train layer.
#pragma once

#include <cmath>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/train/flat_model.hpp"
#include "exdyna/train/trainer.hpp"

namespace exdyna::train {

struct EvalOut {
  double loss = 0, accuracy = std::nan(""), perplexity = std::nan("");
};

// Collective. Every rank evaluates its slice of the test split; sums are all-reduced in rank order,
// so every rank gets the same numbers. Accuracy for image models, perplexity for language models.
EvalOut evaluate(FlatModel& m, const DataBundle& data, const TrainOptions& opts,
                 comm::Communicator& comm);

}  // namespace exdyna::train
