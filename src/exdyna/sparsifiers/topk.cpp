#include "exdyna/sparsifiers/topk.hpp"

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {

TopK::TopK(const SparsifierConfig& cfg, core::TopkMethod method) : cfg_(cfg), method_(method) {
  cfg_.validate();
}

void TopK::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "topk: gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  core::PhaseStopwatch sw;
  const auto k = static_cast<std::size_t>(cfg_.k());
  core::topk_select(acc, k, method_, mine_, scratch_);
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  stats.k_target = cfg_.k();
  stats.target_density = cfg_.density;
  exchange_union(acc, mine_, {}, comm, cfg_.gather_mode, cfg_.values, out, stats, bufs_);
  ++iteration_;
}

std::string TopK::fingerprint() const {
  return std::string("topk;method=") + core::to_string(method_) + ";" + cfg_.fingerprint();
}

std::vector<std::byte> TopK::save_state() const {
  return save_iteration_state(iteration_);
}

void TopK::load_state(std::span<const std::byte> state) {
  iteration_ = load_iteration_state(state, "topk");
}

}  // namespace exdyna::sparsifiers
