#include "exdyna/sparsifiers/randomk.hpp"

#include "exdyna/sparsifiers/sparse_exchange.hpp"

#include <algorithm>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {
namespace {

// Uniform in [0, n) without modulo bias (Lemire, "Fast Random Integer Generation in an
// Interval", 2019): the uniformity test of the draw would notice a biased one at small n_g.
std::uint64_t below(core::SplitMix64& g, std::uint64_t n) {
  unsigned __int128 m = static_cast<unsigned __int128>(g.next()) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t t = (0 - n) % n;
    while (low < t) {
      m = static_cast<unsigned __int128>(g.next()) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

}  // namespace

void randomk_indices(std::uint64_t seed, std::int64_t iteration, std::int64_t n_g, std::int64_t k,
                     std::vector<Index>& out, std::vector<bool>& mark) {
  EXDYNA_CHECK_ARG(n_g > 0 && k >= 0 && k <= n_g, "randomk: cannot draw k = ", k, " of n_g = ", n_g,
                   "; expected 0 <= k <= n_g");
  // One stream per (seed, iteration): mixing both keeps neighbouring seeds' streams apart.
  core::SplitMix64 g(core::splitmix64_mix(seed) ^
                     core::splitmix64_mix(static_cast<std::uint64_t>(iteration) + 1));
  mark.resize(static_cast<std::size_t>(n_g));
  out.clear();
  out.reserve(static_cast<std::size_t>(k));
  // Floyd: for j = n-k .. n-1 draw t in [0, j]; take t, or j when t is taken already. Every
  // k-subset comes out with probability 1 / C(n, k).
  for (std::int64_t j = n_g - k; j < n_g; ++j) {
    auto t = static_cast<std::size_t>(below(g, static_cast<std::uint64_t>(j) + 1));
    if (mark[t]) t = static_cast<std::size_t>(j);
    mark[t] = true;
    out.push_back(static_cast<Index>(t));
  }
  for (const Index i : out) mark[i] = false;
  std::sort(out.begin(), out.end());
}

RandomK::RandomK(const SparsifierConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
}

void RandomK::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                   StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "randomk: gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  core::PhaseStopwatch sw;
  const std::int64_t k = cfg_.k();
  out.dense = false;
  randomk_indices(cfg_.randomk.seed, iteration_, cfg_.n_g, k, out.indices, mark_);
  out.values.resize(out.indices.size());
  for (std::size_t j = 0; j < out.indices.size(); ++j) out.values[j] = acc[out.indices[j]];
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  allreduce_values(comm, cfg_.values, out);
  stats.times.allreduce += sw.lap();

  stats.k_target = k;
  stats.target_density = cfg_.density;
  stats.k_per_worker.assign(static_cast<std::size_t>(comm.size()), k);
  stats.finish_counts();
  // The k indices are shared, not summed over workers: the density is exactly k / n_g, and
  // nothing is padded.
  stats.k_unique = k;
  stats.density = static_cast<double>(k) / static_cast<double>(cfg_.n_g);
  stats.density_error = 0.0;
  stats.f_t = 1.0;
  stats.padded_elements = 0;
  ++iteration_;
}

std::string RandomK::fingerprint() const {
  return "randomk;" + cfg_.fingerprint();
}

std::vector<std::byte> RandomK::save_state() const {
  return save_iteration_state(iteration_);
}

void RandomK::load_state(std::span<const std::byte> state) {
  iteration_ = load_iteration_state(state, "randomk");
}

}  // namespace exdyna::sparsifiers
