#include "exdyna/train/models.hpp"

#include <cmath>

#include "exdyna/core/error.hpp"
#include "exdyna/train/datasets.hpp"

namespace exdyna::train {
namespace nn = torch::nn;
namespace {

// A two-layer perceptron: the fastest model, for tests.
class Tiny : public Net {
 public:
  explicit Tiny(const ModelSpec& s) {
    fc1 = register_module("fc1", nn::Linear(s.channels * s.height * s.width, 32));
    fc2 = register_module("fc2", nn::Linear(32, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    return fc2->forward(torch::relu(fc1->forward(x.flatten(1))));
  }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};

// The small CNN for (Fashion-)MNIST: two 5x5 conv + max-pool stages and two dense layers
// (~0.2M parameters): sized so that a few epochs fit in minutes on two CPU cores.
class SmallCnn : public Net {
 public:
  explicit SmallCnn(const ModelSpec& s) {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(s.channels, 16, 5).padding(2)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(16, 32, 5).padding(2)));
    fc1 = register_module("fc1", nn::Linear(32 * (s.height / 4) * (s.width / 4), 128));
    fc2 = register_module("fc2", nn::Linear(128, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
    return fc2->forward(torch::relu(fc1->forward(x.flatten(1))));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
};

nn::Conv2d conv(int in, int out, int k, int stride = 1, int pad = 0) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}

// ResNet blocks (He et al. 2016), CIFAR stem (3x3 conv, no max-pool).
class Basic : public nn::Module {
 public:
  static constexpr int kExpansion = 1;
  Basic(int in, int planes, int stride) {
    c1 = register_module("conv1", conv(in, planes, 3, stride, 1));
    b1 = register_module("bn1", nn::BatchNorm2d(planes));
    c2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
    b2 = register_module("bn2", nn::BatchNorm2d(planes));
    if (stride != 1 || in != planes) {
      sc = register_module("shortcut",
                           nn::Sequential(conv(in, planes, 1, stride), nn::BatchNorm2d(planes)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = torch::relu(b1->forward(c1->forward(x)));
    y = b2->forward(c2->forward(y));
    return torch::relu(y + (sc ? sc->forward(x) : x));
  }
  nn::Conv2d c1{nullptr}, c2{nullptr};
  nn::BatchNorm2d b1{nullptr}, b2{nullptr};
  nn::Sequential sc{nullptr};
};

class Bottleneck : public nn::Module {
 public:
  static constexpr int kExpansion = 4;
  Bottleneck(int in, int planes, int stride) {
    c1 = register_module("conv1", conv(in, planes, 1));
    b1 = register_module("bn1", nn::BatchNorm2d(planes));
    c2 = register_module("conv2", conv(planes, planes, 3, stride, 1));
    b2 = register_module("bn2", nn::BatchNorm2d(planes));
    c3 = register_module("conv3", conv(planes, planes * 4, 1));
    b3 = register_module("bn3", nn::BatchNorm2d(planes * 4));
    if (stride != 1 || in != planes * 4)
      sc = register_module(
          "shortcut", nn::Sequential(conv(in, planes * 4, 1, stride), nn::BatchNorm2d(planes * 4)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = torch::relu(b1->forward(c1->forward(x)));
    y = torch::relu(b2->forward(c2->forward(y)));
    y = b3->forward(c3->forward(y));
    return torch::relu(y + (sc ? sc->forward(x) : x));
  }
  nn::Conv2d c1{nullptr}, c2{nullptr}, c3{nullptr};
  nn::BatchNorm2d b1{nullptr}, b2{nullptr}, b3{nullptr};
  nn::Sequential sc{nullptr};
};

template <typename Block>
class ResNet : public Net {
 public:
  ResNet(const ModelSpec& s, std::array<int, 4> depth) {
    stem = register_module("conv1", conv(s.channels, 64, 3, 1, 1));
    bn = register_module("bn1", nn::BatchNorm2d(64));
    int in = 64;
    const int planes[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4; ++l) {
      nn::Sequential seq;
      for (int b = 0; b < depth[static_cast<std::size_t>(l)]; ++b) {
        const int stride = (b == 0 && l > 0) ? 2 : 1;
        seq->push_back(std::make_shared<Block>(in, planes[l], stride));
        in = planes[l] * Block::kExpansion;
      }
      layers.push_back(register_module("layer" + std::to_string(l + 1), seq));
    }
    fc = register_module("fc", nn::Linear(in, s.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = torch::relu(bn->forward(stem->forward(x)));
    for (auto& l : layers) {
      for (auto& m : *l) x = m.template ptr<Block>()->forward(x);
    }
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc->forward(x);
  }
  nn::Conv2d stem{nullptr};
  nn::BatchNorm2d bn{nullptr};
  std::vector<nn::Sequential> layers;
  nn::Linear fc{nullptr};
};

// Word-level language model: embedding, a multi-layer LSTM, a linear decoder (Zaremba et al.,
// the paper's WikiText-2 model). Input [B, T] token ids, output [B * T, vocab] logits.
class LstmLm : public Net {
 public:
  explicit LstmLm(const ModelSpec& s) {
    EXDYNA_CHECK_ARG(s.vocab > 1, "lstm: vocabulary of ", s.vocab, " tokens; expected > 1");
    embed = register_module("embed", nn::Embedding(s.vocab, s.embed));
    lstm = register_module(
        "lstm",
        nn::LSTM(nn::LSTMOptions(s.embed, s.hidden).num_layers(s.layers).batch_first(true)));
    decoder = register_module("decoder", nn::Linear(s.hidden, s.vocab));
  }
  torch::Tensor forward(torch::Tensor x) override {
    auto y = std::get<0>(lstm->forward(embed->forward(x)));
    return decoder->forward(y.reshape({-1, y.size(2)}));
  }
  nn::Embedding embed{nullptr};
  nn::LSTM lstm{nullptr};
  nn::Linear decoder{nullptr};
};

// PyTorch's default initialisation (uniform +-1/sqrt(fan_in) for weights and biases), LSTM
// weights +-1/sqrt(hidden), embeddings +-0.1, batch-norm weight 1 and bias 0 — drawn from our own
// seeded generator in registration order.
void init_parameters(Net& net, std::uint64_t seed) {
  torch::NoGradGuard ng;
  SplitMix64 g(mix_seed(seed, 0x1417));
  double last_bound = 0.1;
  for (auto& item : net.named_parameters()) {
    const auto& name = item.key();
    auto p = item.value();
    const bool is_norm =
        name.find("bn") != std::string::npos || name.find("shortcut.1") != std::string::npos;
    double bound;
    if (is_norm) {
      p.fill_(name.ends_with("weight") ? 1.0 : 0.0);
      continue;
    } else if (name.find("embed") != std::string::npos) {
      bound = 0.1;
    } else if (name.find("lstm") != std::string::npos) {
      bound = 1.0 / std::sqrt(static_cast<double>(p.size(0) / 4));
    } else if (p.dim() >= 2) {
      bound = 1.0 / std::sqrt(static_cast<double>(p.numel() / p.size(0)));
      last_bound = bound;
    } else {
      bound = last_bound;  // a bias: its weight came just before it
    }
    auto cpu = torch::empty(p.sizes(), torch::kFloat);
    float* d = cpu.data_ptr<float>();
    for (std::int64_t i = 0; i < cpu.numel(); ++i)
      d[i] = static_cast<float>((2 * g.uniform() - 1) * bound);
    p.copy_(cpu);
  }
}

}  // namespace

const char* model_names() {
  return "tiny, cnn, resnet18, resnet152, lstm";
}

std::shared_ptr<Net> make_model(const ModelSpec& s, std::uint64_t seed) {
  std::shared_ptr<Net> net;
  if (s.name == "tiny")
    net = std::make_shared<Tiny>(s);
  else if (s.name == "cnn")
    net = std::make_shared<SmallCnn>(s);
  else if (s.name == "resnet18")
    net = std::make_shared<ResNet<Basic>>(s, std::array<int, 4>{2, 2, 2, 2});
  else if (s.name == "resnet152")
    net = std::make_shared<ResNet<Bottleneck>>(s, std::array<int, 4>{3, 8, 36, 3});
  else if (s.name == "lstm")
    net = std::make_shared<LstmLm>(s);
  else
    throw InvalidArgument("unknown model '" + s.name + "'; expected one of " + model_names());
  init_parameters(*net, seed);
  return net;
}

}  // namespace exdyna::train
