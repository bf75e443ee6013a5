#include "exdyna/sparsifiers/cltk.hpp"

#include "exdyna/sparsifiers/sparse_exchange.hpp"

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {

CltK::CltK(const SparsifierConfig& cfg, core::TopkMethod method) : cfg_(cfg), method_(method) {
  cfg_.validate();
}

void CltK::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "cltk: gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  core::PhaseStopwatch sw;
  const int n = comm.size();
  const int lead = leader(n);
  // k <= n_g (validated), so the leader always has exactly k indices and every rank knows the
  // broadcast size without a count exchange.
  const auto k = static_cast<std::size_t>(cfg_.k());
  out.dense = false;
  if (comm.rank() == lead) {
    core::topk_select(acc, k, method_, out.indices, scratch_);
  } else {
    out.indices.resize(k);
  }
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  comm.broadcast_values<Index>(out.indices, lead);
  stats.times.broadcast += sw.lap();

  out.values.resize(k);
  for (std::size_t j = 0; j < k; ++j) {
    const Index i = out.indices[j];
    EXDYNA_CHECK(i < acc.size(), "cltk: broadcast index ", i, " is outside the gradient of ",
                 acc.size(), " elements");
    out.values[j] = acc[i];
  }
  stats.times.other += sw.lap();
  allreduce_values(comm, cfg_.values, out);
  stats.times.allreduce += sw.lap();

  stats.k_target = cfg_.k();
  stats.target_density = cfg_.density;
  stats.k_per_worker.assign(static_cast<std::size_t>(n), 0);
  stats.k_per_worker[static_cast<std::size_t>(lead)] = static_cast<std::int64_t>(k);
  stats.finish_counts();
  // One list is broadcast, not a padded all-gather: nothing is padded.
  stats.f_t = 1.0;
  stats.padded_elements = 0;
  stats.k_unique = static_cast<std::int64_t>(k);
  ++iteration_;
}

std::string CltK::fingerprint() const {
  return std::string("cltk;method=") + core::to_string(method_) + ";" + cfg_.fingerprint();
}

std::vector<std::byte> CltK::save_state() const {
  return save_iteration_state(iteration_);
}

void CltK::load_state(std::span<const std::byte> state) {
  iteration_ = load_iteration_state(state, "cltk");
}

}  // namespace exdyna::sparsifiers
