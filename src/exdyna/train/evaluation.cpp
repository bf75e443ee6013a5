#include "exdyna/train/evaluation.hpp"

#include <algorithm>
#include <vector>

#include "exdyna/train/batches.hpp"

namespace exdyna::train {

EvalOut evaluate(FlatModel& m, const DataBundle& data, const TrainOptions& opts,
                 comm::Communicator& comm) {
  torch::NoGradGuard ng;
  m.net->eval();
  double acc[3] = {0, 0, 0};  // loss sum, correct, count
  const int w = comm.size(), r = comm.rank();
  if (data.text) {
    const auto& toks = data.text->test;
    const std::int64_t nchunks = (static_cast<std::int64_t>(toks.size()) - 1) / opts.bptt;
    std::vector<std::int64_t> mine;
    for (std::int64_t j = r; j < nchunks; j += w) mine.push_back(j);
    for (std::size_t s = 0; s < mine.size(); s += 64) {
      const auto nb = static_cast<std::int64_t>(std::min<std::size_t>(64, mine.size() - s));
      auto x = torch::empty({nb, opts.bptt}, torch::kLong);
      auto y = torch::empty({nb * opts.bptt}, torch::kLong);
      for (std::int64_t b = 0; b < nb; ++b)
        for (std::int64_t t = 0; t < opts.bptt; ++t) {
          const auto base =
              static_cast<std::size_t>(mine[s + static_cast<std::size_t>(b)] * opts.bptt + t);
          x.data_ptr<std::int64_t>()[b * opts.bptt + t] = toks[base];
          y.data_ptr<std::int64_t>()[b * opts.bptt + t] = toks[base + 1];
        }
      auto out = m.net->forward(x);
      acc[0] += torch::nn::functional::cross_entropy(
                    out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
      acc[2] += static_cast<double>(nb * opts.bptt);
    }
  } else {
    const auto& d = *data.test_images;
    const std::int64_t n = d.size();
    const std::int64_t lo = n * r / w, hi = n * (r + 1) / w;
    std::vector<std::int64_t> idx;
    for (std::int64_t s = lo; s < hi; s += 500) {
      idx.clear();
      for (std::int64_t i = s; i < std::min(hi, s + 500); ++i) idx.push_back(i);
      torch::Tensor y;
      auto x = image_batch(d, idx, false, 0, y);
      auto out = m.net->forward(x);
      acc[0] += torch::nn::functional::cross_entropy(
                    out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
      acc[1] += out.argmax(1).eq(y).sum().item<double>();
      acc[2] += static_cast<double>(idx.size());
    }
  }
  comm.allreduce_sum(std::span<double>(acc, 3));
  m.net->train();
  EvalOut e;
  e.loss = acc[2] > 0 ? acc[0] / acc[2] : std::nan("");
  if (data.text)
    e.perplexity = std::exp(e.loss);
  else
    e.accuracy = acc[2] > 0 ? acc[1] / acc[2] : std::nan("");
  return e;
}

}  // namespace exdyna::train
