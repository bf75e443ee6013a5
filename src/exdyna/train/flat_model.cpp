#include "exdyna/train/flat_model.hpp"

#include "exdyna/core/error.hpp"

namespace exdyna::train {

FlatModel::FlatModel(const ModelSpec& spec, std::uint64_t seed) {
  net = make_model(spec, seed);
  params = net->parameters();
  for (const auto& p : params) n += p.numel();
  flat_p = torch::empty({n}, torch::kFloat);
  flat_g = torch::zeros({n}, torch::kFloat);
  torch::NoGradGuard ng;
  std::int64_t off = 0;
  for (auto& p : params) {
    const auto k = p.numel();
    auto pv = flat_p.narrow(0, off, k).view(p.sizes());
    pv.copy_(p);
    p.set_data(pv);
    p.mutable_grad() = flat_g.narrow(0, off, k).view(p.sizes());
    off += k;
  }
  for (auto& b : net->buffers())
    if (b.scalar_type() == torch::kFloat) float_buffers.push_back(b);
}

void FlatModel::check_grad_views() {
  std::int64_t off = 0;
  for (auto& p : params) {
    EXDYNA_CHECK(p.grad().defined() && p.grad().data_ptr<float>() == flat_g.data_ptr<float>() + off,
                 "a parameter's gradient is no longer a view into the flat gradient buffer");
    off += p.numel();
  }
}

std::vector<float> FlatModel::get_buffers() const {
  std::vector<float> v;
  for (const auto& b : float_buffers) {
    auto c = b.contiguous();
    v.insert(v.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return v;
}

void FlatModel::set_buffers(const std::vector<float>& v) {
  torch::NoGradGuard ng;
  std::size_t off = 0;
  for (auto& b : float_buffers) {
    EXDYNA_CHECK(off + static_cast<std::size_t>(b.numel()) <= v.size(), "buffer size mismatch");
    b.copy_(torch::from_blob(const_cast<float*>(v.data() + off), b.sizes(), torch::kFloat));
    off += static_cast<std::size_t>(b.numel());
  }
}

void FlatModel::average_buffers(comm::Communicator& comm) {
  if (float_buffers.empty()) return;
  auto b = get_buffers();
  comm.allreduce_sum(std::span<float>(b));
  for (auto& v : b) v /= static_cast<float>(comm.size());
  set_buffers(b);
}

}  // namespace exdyna::train
