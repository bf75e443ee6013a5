#include "exdyna/sparsifiers/hard_threshold.hpp"

#include <cmath>
#include <sstream>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/huge_pages.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

HardThreshold::HardThreshold(const SparsifierConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
  threshold_ = cfg_.hard_threshold >= 0 ? cfg_.hard_threshold
                                        : 1.0 / (2.0 * std::sqrt(static_cast<double>(cfg_.k())));
}

void HardThreshold::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                         StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g,
                   "hard-threshold: gradient has ", acc.size(),
                   " elements, expected n_g = ", cfg_.n_g);
  core::PhaseStopwatch sw;
  core::resize_huge(mine_, acc.size());  // select_threshold needs room for every element
  const std::size_t c =
      sparsifiers::select_threshold(acc, static_cast<float>(threshold_), 0, mine_.data());
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  stats.threshold = threshold_;
  stats.k_target = cfg_.k();
  stats.target_density = cfg_.density;
  exchange_union(acc, std::span<const Index>(mine_.data(), c), {}, comm, cfg_.gather_mode,
                 cfg_.values, out, stats, bufs_);
}

std::string HardThreshold::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "hard-threshold;threshold=" << threshold_ << ";" << cfg_.fingerprint();
  return os.str();
}

void HardThreshold::load_state(std::span<const std::byte> state) {
  core::ByteReader(state, "hard-threshold state").expect_end();
}

}  // namespace exdyna::sparsifiers
