#include "exdyna/sparsifiers/gaussiank.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/huge_pages.hpp"
#include "exdyna/core/normal_quantile.hpp"
#include "exdyna/core/reductions.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

namespace {

constexpr int kMaxCorrections = 3;

}  // namespace

GaussianKEstimate gaussiank_select(std::span<const float> acc, double density,
                                   std::vector<Index>& indices) {
  EXDYNA_CHECK_ARG(std::isfinite(density) && density > 0 && density <= 1, "gaussiank: density ",
                   density, " is not valid; expected a value in (0, 1]");
  GaussianKEstimate est;
  core::resize_huge(indices, acc.size());
  if (acc.empty()) return est;
  if (density >= 1) {
    est.count = sparsifiers::select_threshold(acc, 0.0f, 0, indices.data());
    return est;
  }
  const double n = static_cast<double>(acc.size());
  const auto m = core::moments(acc);
  const double mu = m.sum / n;
  const double sigma = std::sqrt(std::max(0.0, m.sum_sq / n - mu * mu));
  // Phi^-1(1 - d/2) as -Phi^-1(d/2): no rounding of 1 - d/2 for small d.
  est.threshold = std::fabs(mu) - sigma * core::normal_quantile(density / 2);
  const double k = std::floor(density * n);
  for (;;) {
    est.count = sparsifiers::select_threshold(acc, sparsifiers::as_compare_threshold(est.threshold),
                                              0, indices.data());
    const double c = static_cast<double>(est.count);
    const bool few = c<2 * k / 3, many = c> 4 * k / 3;
    if ((!few && !many) || est.corrections == kMaxCorrections) break;
    est.threshold *= few ? 0.5 : 1.5;
    ++est.corrections;
  }
  return est;
}

GaussianK::GaussianK(const SparsifierConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
}

void GaussianK::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                     StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "gaussiank: gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  core::PhaseStopwatch sw;
  const auto est = gaussiank_select(acc, cfg_.density, mine_);
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  stats.k_target = cfg_.k();
  stats.target_density = cfg_.density;
  exchange_union_with_threshold(acc, std::span<const Index>(mine_.data(), est.count), est.threshold,
                                comm, cfg_.gather_mode, cfg_.values, out, stats, bufs_);
}

void GaussianK::load_state(std::span<const std::byte> state) {
  core::ByteReader(state, "gaussiank state").expect_end();
}

}  // namespace exdyna::sparsifiers
