#include "exdyna/train/models.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"
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

// Inception-v4 (Szegedy et al. 2016, Figs. 3-9, 1): stem, 4x Inception-A, Reduction-A,
// 7x Inception-B, Reduction-B, 3x Inception-C, average pool, dropout (keep 0.8), linear.
// Every convolution is conv (no bias) + batch norm + ReLU.
//
// CIFAR adaptation (as CIFAR ports of Inception usually do): the ImageNet stem takes 299x299 to
// 35x35 with three stride-2 stages and 'valid' convolutions; on 32x32 inputs that would leave a
// 2x2 grid before Reduction-A (and nothing after Reduction-B). Here every stem convolution has
// stride 1 and 'same' padding, and the stem's two max-pool branches (Fig. 3) pool 3x3 with
// stride 1 (padding 1) instead of stride 2. The stem keeps its branches and channel counts, so
// the parameter count is the ImageNet one; the grids are 32x32 for Inception-A (ImageNet: 35),
// 15x15 for Inception-B (17) and 7x7 for Inception-C (8). The reductions are unchanged (stride 2,
// 'valid'). Average pooling inside the blocks excludes the padding, as TF's 'SAME' pooling does.
//
// ModelSpec::width_mult scales every convolution's channel count (1 = the paper's widths), so that
// tests can run a training step on a narrow copy of the same topology.
class ConvBn : public nn::Module {
 public:
  ConvBn(int in, int out, int kh, int kw, int stride, int ph, int pw) {
    conv = register_module(
        "conv",
        nn::Conv2d(
            nn::Conv2dOptions(in, out, {kh, kw}).stride(stride).padding({ph, pw}).bias(false)));
    bn = register_module("bn", nn::BatchNorm2d(out));
  }
  torch::Tensor forward(torch::Tensor x) { return torch::relu(bn->forward(conv->forward(x))); }
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
};

// Building blocks for the branches: k x k 'same' (stride 1) or 'valid' stride-2 convolutions,
// 1 x n / n x 1 factorised ones, and 3x3 poolings.
std::shared_ptr<ConvBn> cbn(int in, int out, int k, int stride = 1) {
  return std::make_shared<ConvBn>(in, out, k, k, stride, stride == 1 ? k / 2 : 0,
                                  stride == 1 ? k / 2 : 0);
}
std::shared_ptr<ConvBn> c1xn(int in, int out, int n) {
  return std::make_shared<ConvBn>(in, out, 1, n, 1, 0, n / 2);
}
std::shared_ptr<ConvBn> cnx1(int in, int out, int n) {
  return std::make_shared<ConvBn>(in, out, n, 1, 1, n / 2, 0);
}
nn::AvgPool2d avg_same() {
  return nn::AvgPool2d(nn::AvgPool2dOptions(3).stride(1).padding(1).count_include_pad(false));
}
nn::MaxPool2d max_pool(int stride) {
  return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(stride).padding(stride == 1 ? 1 : 0));
}

// Parallel branches whose outputs are concatenated along the channels ("filter concat").
class Concat : public nn::Module {
 public:
  void add(nn::Sequential s) {
    branches.push_back(register_module("branch" + std::to_string(branches.size()), s));
  }
  torch::Tensor forward(torch::Tensor x) {
    std::vector<torch::Tensor> ys;
    for (auto& b : branches) ys.push_back(b->forward(x));
    return torch::cat(ys, 1);
  }
  std::vector<nn::Sequential> branches;
};

// Inception-C's 3x3 factorisation: a trunk, then 1x3 and 3x1 side by side (Fig. 6).
class SplitBranch : public nn::Module {
 public:
  SplitBranch(nn::Sequential t, int in, int out) {
    trunk = register_module("trunk", t);
    a = register_module("a", c1xn(in, out, 3));
    b = register_module("b", cnx1(in, out, 3));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = trunk->forward(x);
    return torch::cat({a->forward(x), b->forward(x)}, 1);
  }
  nn::Sequential trunk{nullptr};
  std::shared_ptr<ConvBn> a, b;
};

class InceptionV4 : public Net {
 public:
  static constexpr double kDropout = 0.2;  // the paper's keep probability 0.8

  InceptionV4(const ModelSpec& s, std::uint64_t seed) : seed_(seed) {
    EXDYNA_CHECK_ARG(s.width_mult > 0 && s.width_mult <= 4, "inception-v4: width multiplier ",
                     s.width_mult, " is not valid; expected in (0, 4]");
    EXDYNA_CHECK_ARG(s.height >= 16 && s.width >= 16, "inception-v4: input ", s.height, "x",
                     s.width, " is too small; expected at least 16x16 (built for 32x32)");
    const auto w = [&](int c) {
      return std::max(1, static_cast<int>(std::lround(c * s.width_mult)));
    };
    int c = s.channels;
    // Stem (Fig. 3), stride 1 throughout (see above).
    stem = register_module(
        "stem", nn::Sequential(cbn(c, w(32), 3), cbn(w(32), w(32), 3), cbn(w(32), w(64), 3)));
    c = w(64);
    auto m3 = std::make_shared<Concat>();
    m3->add(nn::Sequential(max_pool(1)));
    m3->add(nn::Sequential(cbn(c, w(96), 3)));
    c += w(96);
    auto m4 = std::make_shared<Concat>();
    m4->add(nn::Sequential(cbn(c, w(64), 1), cbn(w(64), w(96), 3)));
    m4->add(nn::Sequential(cbn(c, w(64), 1), c1xn(w(64), w(64), 7), cnx1(w(64), w(64), 7),
                           cbn(w(64), w(96), 3)));
    c = 2 * w(96);
    auto m5 = std::make_shared<Concat>();
    m5->add(nn::Sequential(cbn(c, w(192), 3)));
    m5->add(nn::Sequential(max_pool(1)));
    c += w(192);
    blocks = nn::Sequential(m3, m4, m5);
    // 4 x Inception-A (Fig. 4).
    for (int i = 0; i < 4; ++i) {
      auto a = std::make_shared<Concat>();
      a->add(nn::Sequential(avg_same(), cbn(c, w(96), 1)));
      a->add(nn::Sequential(cbn(c, w(96), 1)));
      a->add(nn::Sequential(cbn(c, w(64), 1), cbn(w(64), w(96), 3)));
      a->add(nn::Sequential(cbn(c, w(64), 1), cbn(w(64), w(96), 3), cbn(w(96), w(96), 3)));
      blocks->push_back(a);
      c = 4 * w(96);
    }
    // Reduction-A (Fig. 7) with k, l, m, n = 192, 224, 256, 384 (Table 1).
    {
      auto r = std::make_shared<Concat>();
      r->add(nn::Sequential(max_pool(2)));
      r->add(nn::Sequential(cbn(c, w(384), 3, 2)));
      r->add(nn::Sequential(cbn(c, w(192), 1), cbn(w(192), w(224), 3), cbn(w(224), w(256), 3, 2)));
      blocks->push_back(r);
      c += w(384) + w(256);
    }
    // 7 x Inception-B (Fig. 5).
    for (int i = 0; i < 7; ++i) {
      auto b = std::make_shared<Concat>();
      b->add(nn::Sequential(avg_same(), cbn(c, w(128), 1)));
      b->add(nn::Sequential(cbn(c, w(384), 1)));
      b->add(nn::Sequential(cbn(c, w(192), 1), c1xn(w(192), w(224), 7), cnx1(w(224), w(256), 7)));
      b->add(nn::Sequential(cbn(c, w(192), 1), c1xn(w(192), w(192), 7), cnx1(w(192), w(224), 7),
                            c1xn(w(224), w(224), 7), cnx1(w(224), w(256), 7)));
      blocks->push_back(b);
      c = w(128) + w(384) + 2 * w(256);
    }
    // Reduction-B (Fig. 8).
    {
      auto r = std::make_shared<Concat>();
      r->add(nn::Sequential(max_pool(2)));
      r->add(nn::Sequential(cbn(c, w(192), 1), cbn(w(192), w(192), 3, 2)));
      r->add(nn::Sequential(cbn(c, w(256), 1), c1xn(w(256), w(256), 7), cnx1(w(256), w(320), 7),
                            cbn(w(320), w(320), 3, 2)));
      blocks->push_back(r);
      c += w(192) + w(320);
    }
    // 3 x Inception-C (Fig. 6).
    for (int i = 0; i < 3; ++i) {
      auto cc = std::make_shared<Concat>();
      cc->add(nn::Sequential(avg_same(), cbn(c, w(256), 1)));
      cc->add(nn::Sequential(cbn(c, w(256), 1)));
      cc->add(nn::Sequential(
          std::make_shared<SplitBranch>(nn::Sequential(cbn(c, w(384), 1)), w(384), w(256))));
      cc->add(nn::Sequential(std::make_shared<SplitBranch>(
          nn::Sequential(cbn(c, w(384), 1), c1xn(w(384), w(448), 3), cnx1(w(448), w(512), 3)),
          w(512), w(256))));
      blocks->push_back(cc);
      c = 6 * w(256);
    }
    register_module("blocks", blocks);
    fc = register_module("fc", nn::Linear(c, s.num_classes));
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = blocks->forward(stem->forward(x));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1).contiguous();
    return fc->forward(dropout(x));
  }

 private:
  // Dropout whose mask is drawn from SplitMix64 seeded with (model seed, a hash of the pooled
  // features): torch's global generator is shared by the in-process workers' threads (racy,
  // not reproducible) and its state is not in our checkpoints, whereas this mask is a pure
  // function of the step's inputs and weights, so runs, ranks and resumed runs stay
  // deterministic.
  torch::Tensor dropout(const torch::Tensor& x) {
    if (!is_training()) return x;
    const float* d = x.data_ptr<float>();
    std::uint64_t h = core::kFnv1aOffset;  // FNV-1a over the 32-bit words, not the bytes
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, d + i, sizeof bits);
      h = core::fnv1a_round(h, bits);
    }
    SplitMix64 g(mix_seed(seed_, 0xd80, h));
    auto mask = torch::empty(x.sizes(), torch::kFloat);
    float* m = mask.data_ptr<float>();
    const float keep = static_cast<float>(1.0 / (1.0 - kDropout));
    for (std::int64_t i = 0; i < mask.numel(); ++i) m[i] = g.uniform() < kDropout ? 0.f : keep;
    return x * mask;
  }

  std::uint64_t seed_;
  nn::Sequential stem{nullptr}, blocks;
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
  return "tiny, cnn, resnet18, resnet152, inception-v4, lstm";
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
  else if (s.name == "inception-v4" || s.name == "inception_v4")
    net = std::make_shared<InceptionV4>(s, seed);
  else if (s.name == "lstm")
    net = std::make_shared<LstmLm>(s);
  else
    throw InvalidArgument("unknown model '" + s.name + "'; expected one of " + model_names());
  init_parameters(*net, seed);
  return net;
}

}  // namespace exdyna::train
