#include "exdyna/sparsifiers/dgc.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "exdyna/core/hash.hpp"
#include "exdyna/core/huge_pages.hpp"

namespace exdyna::sparsifiers {

namespace {

// At least this many sampled values above the threshold (see dgc.hpp).
constexpr double kMinSampledAbove = 64;

// The exact top-k of the `passed` selected elements, written back over indices[0 .. k).
std::size_t refine(std::span<const float> acc, std::size_t passed, std::size_t k,
                   std::vector<Index>& indices, DgcScratch& s) {
  s.values.resize(passed);
  for (std::size_t j = 0; j < passed; ++j) s.values[j] = acc[indices[j]];
  core::topk_select(s.values, k, core::TopkMethod::kNthElement, s.picked, s.topk);
  // picked holds ascending positions into the ascending list: in place, front to back.
  for (std::size_t j = 0; j < s.picked.size(); ++j) indices[j] = indices[s.picked[j]];
  return s.picked.size();
}

}  // namespace

std::size_t dgc_sample_size(std::size_t n, double density, double ratio) {
  const double want =
      std::max(std::ceil(ratio * static_cast<double>(n)), std::ceil(kMinSampledAbove / density));
  return std::min(n, static_cast<std::size_t>(want));
}

DgcEstimate dgc_select(std::span<const float> acc, double density, double ratio,
                       std::uint64_t stream_key, std::vector<Index>& indices, DgcScratch& scratch) {
  check_density("dgc", density);
  EXDYNA_CHECK_ARG(std::isfinite(ratio) && ratio > 0 && ratio <= 1, "--dgc-sample ", ratio,
                   " is not valid; expected a value in (0, 1]");
  DgcEstimate est;
  core::resize_huge(indices, acc.size());
  if (acc.empty()) return est;
  const std::size_t n = acc.size();
  const auto k = static_cast<std::size_t>(std::floor(density * static_cast<double>(n)));
  const std::size_t s = dgc_sample_size(n, density, ratio);
  auto& sample = scratch.sample;
  sample.resize(s);
  core::SplitMix64 g(stream_key);
  for (auto& v : sample) v = std::fabs(acc[g.below(n)]);
  const auto ks = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::ceil(density * static_cast<double>(s))), 1, s);
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(ks - 1),
                   sample.end(), std::greater<float>());
  est.threshold = sample[ks - 1];
  est.passed = select_at_estimate(acc, est.threshold, indices);
  est.count = est.passed;
  if (k > 0 && 3 * est.passed > 4 * k) {
    est.count = refine(acc, est.passed, k, indices, scratch);
    est.refined = true;
  }
  return est;
}

Dgc::Dgc(const SparsifierConfig& cfg)
    : ThresholdUnion(cfg, ThresholdSource::kPerWorker), density_(cfg.density) {}

void Dgc::set_density(double density) {
  check_density("dgc", density);
  EXDYNA_CHECK_ARG(std::floor(density * static_cast<double>(cfg().n_g)) >= 1, "dgc: density ",
                   density, " selects no element of n_g = ", cfg().n_g, "; expected d * n_g >= 1");
  density_ = density;
}

ThresholdSelection Dgc::select(std::span<const float> acc, std::vector<Index>& indices) {
  // One sample stream per (rank, iteration): workers sample independently, runs repeat.
  const std::uint64_t key = core::splitmix64_mix(static_cast<std::uint64_t>(cfg().rank) + 1) ^
                            core::splitmix64_mix(static_cast<std::uint64_t>(iteration_) ^
                                                 0x6467630000000000ULL);  // "dgc"
  const auto est = dgc_select(acc, density_, cfg().dgc.sample, key, indices, scratch_);
  return {est.threshold, est.count};
}

void Dgc::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
               StepStats& stats) {
  ThresholdUnion::step(acc, comm, out, stats);
  ++iteration_;
}

std::vector<std::byte> Dgc::save_state() const {
  return save_iteration_state(iteration_);
}

void Dgc::load_state(std::span<const std::byte> state) {
  iteration_ = load_iteration_state(state, "dgc");
}

}  // namespace exdyna::sparsifiers
