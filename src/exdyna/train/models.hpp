// Models in libtorch C++. Included only by torch translation units of the train layer (the
// trainer, tests): keep it out of headers that torch-free code includes.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

namespace exdyna::train {

// Every model maps a float input batch to logits ([B, classes] or, for language models,
// [B * T, vocab]).
class Net : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

struct ModelSpec {
  std::string name = "cnn";  // tiny | cnn | resnet18 | resnet152 | inception-v4 | lstm
  int channels = 1, height = 28, width = 28;
  int num_classes = 10;
  // Channel-width multiplier (inception-v4 only; 1 = the paper's widths): tests run training
  // steps on a narrow copy of the same topology.
  double width_mult = 1.0;
  // Language models.
  std::int64_t vocab = 0;
  int embed = 200, hidden = 200, layers = 2;
};

// Builds the model with deterministic, seeded initial weights (independent of torch's global
// generator, so threads building replicas at once get identical weights).
std::shared_ptr<Net> make_model(const ModelSpec& spec, std::uint64_t seed);

// The model names make_model accepts, for help texts.
const char* model_names();

}  // namespace exdyna::train
