// Cost of ExDyna's options beyond the paper (--controller histogram, --balance exact) against the
// non-communication work of a paper-mode ExDyna step, for one of 8 workers in steady state at
// d = 0.01 (Laplace values, the threshold that selects 1%):
//   paper step  = ef_accumulate(n_g) + select(n_g / 8) + update(n_g, k')
//   options add = ladder select - select + exact balance (block shares, boundaries) + controller
// docs/controller.md divides the second by the first.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna_options.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"
#include "exdyna/sparsifiers/exdyna/threshold.hpp"

namespace {

constexpr int kWorkers = 8;
constexpr double kDensity = 0.01;
const exdyna::sparsifiers::ExDynaOptions kOpts;  // the ladder's default rungs and span

struct Data {
  std::vector<float> acc, grad, residual;
  std::vector<std::uint32_t> gathered;  // the k' indices every rank holds after the all-gather
  float thr = 0;
};

Data& data(std::int64_t n) {
  static std::vector<std::pair<std::int64_t, Data>> cache;
  for (auto& [m, d] : cache)
    if (m == n) return d;
  Data d;
  d.acc.resize(static_cast<std::size_t>(n));
  d.grad.resize(d.acc.size());
  d.residual.assign(d.acc.size(), 0.0f);
  std::uint64_t s = 0x2545F4914F6CDD1Dull;
  auto laplace = [&s] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const double u = (static_cast<double>(s >> 11) + 0.5) / 9007199254740992.0;
    return static_cast<float>(-std::log(u)) * ((s & 1) ? 1.0f : -1.0f);
  };
  for (auto& x : d.acc) x = laplace();
  for (auto& x : d.grad) x = laplace();
  d.thr = static_cast<float>(std::log(1.0 / kDensity));  // P(|x| >= t) = e^-t for Laplace(1)
  d.gathered.resize(d.acc.size());
  d.gathered.resize(exdyna::sparsifiers::select_threshold(d.acc, d.thr, 0, d.gathered.data()));
  cache.emplace_back(n, std::move(d));
  return cache.back().second;
}

std::span<const float> partition(const Data& d) {
  return std::span<const float>(d.acc).first(d.acc.size() / kWorkers);
}

void BM_paper_select(benchmark::State& st) {
  auto& d = data(st.range(0));
  const auto part = partition(d);
  std::vector<std::uint32_t> out(part.size());
  for (auto _ : st)
    benchmark::DoNotOptimize(exdyna::sparsifiers::select_threshold(part, d.thr, 0, out.data()));
}

void BM_ladder_select(benchmark::State& st) {
  auto& d = data(st.range(0));
  const auto part = partition(d);
  std::vector<std::uint32_t> out(part.size());
  std::vector<float> scratch(part.size());
  exdyna::sparsifiers::HistogramController h(kOpts.ladder_rungs, kOpts.ladder_span);
  const auto grid = h.grid(d.thr);
  std::vector<std::int64_t> bins(static_cast<std::size_t>(h.rungs()));
  for (auto _ : st) {
    std::fill(bins.begin(), bins.end(), 0);
    benchmark::DoNotOptimize(exdyna::sparsifiers::select_threshold_ladder(
        part, d.thr, 0, out.data(), grid, bins.data(), scratch.data()));
  }
}

// The exact controller's selection: candidates and bins (one pass), then the cut to exactly k
// (this worker's k / 8 share; the quota is in the bin at the threshold). reach: rungs below the
// threshold, the steady quarter octave or, while a worker cap binds, half an octave.
void exact_select(benchmark::State& st, bool capped) {
  auto& d = data(st.range(0));
  const auto part = partition(d);
  std::vector<std::uint32_t> out(part.size());
  std::vector<float> abs(part.size());
  exdyna::sparsifiers::HistogramController h(kOpts.ladder_rungs, kOpts.ladder_span);
  if (capped) h.set_down(2 * h.steady_down());
  const auto grid = h.grid(d.thr);
  std::vector<std::int64_t> bins(static_cast<std::size_t>(h.rungs()));
  const auto k = static_cast<std::int64_t>(kDensity * static_cast<double>(part.size()));
  for (auto _ : st) {
    std::fill(bins.begin(), bins.end(), 0);
    const auto c = exdyna::sparsifiers::collect_ladder_candidates(part, 0, grid, out.data(),
                                                                  abs.data(), bins.data());
    const auto cut = exdyna::sparsifiers::cut_ladder(bins, k);
    benchmark::DoNotOptimize(
        exdyna::sparsifiers::take_cut(out.data(), abs.data(), c, grid, cut.rung, cut.need));
  }
}
void BM_exact_select(benchmark::State& st) {
  exact_select(st, false);
}
void BM_exact_select_capped(benchmark::State& st) {
  exact_select(st, true);
}

void BM_ef_accumulate(benchmark::State& st) {
  auto& d = data(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(exdyna::sparsifiers::accumulate(d.residual, d.grad));
  std::fill(d.residual.begin(), d.residual.end(), 0.0f);
}

// ErrorFeedback's update: the averaged sparse gradient scattered into a zeroed buffer, the
// residual zeroed at the gathered indices.
void BM_update(benchmark::State& st) {
  auto& d = data(st.range(0));
  std::vector<float> values(d.gathered.size(), 1.0f);
  for (auto _ : st) {
    std::fill(d.grad.begin(), d.grad.end(), 0.0f);
    for (std::size_t j = 0; j < d.gathered.size(); ++j) {
      d.grad[d.gathered[j]] = values[j] * 0.125f;
      d.residual[d.gathered[j]] = 0.0f;
    }
    benchmark::ClobberMemory();
  }
}

// Exact balance's bookkeeping on every rank: block shares of the k' gathered indices, the
// smoothed load, new boundaries.
void BM_exact_balance(benchmark::State& st) {
  auto& d = data(st.range(0));
  const auto layout = exdyna::sparsifiers::make_block_layout(st.range(0), kWorkers, 1024);
  exdyna::sparsifiers::Partitions parts(layout, kWorkers, 1.0);
  std::vector<std::uint32_t> hits(static_cast<std::size_t>(layout.n_blocks));
  std::vector<double> load(hits.size(), 0.0);
  for (auto _ : st) {
    std::fill(hits.begin(), hits.end(), 0u);
    layout.count_per_block(d.gathered, hits);
    const double share = 1.0 / static_cast<double>(d.gathered.size());
    for (std::size_t b = 0; b < load.size(); ++b) load[b] = 0.5 * load[b] + 0.5 * share * hits[b];
    parts.balance_exact(load);
    benchmark::DoNotOptimize(parts.blocks().data());
  }
}

void BM_histogram_controller(benchmark::State& st) {
  auto& d = data(st.range(0));
  exdyna::sparsifiers::HistogramController h(kOpts.ladder_rungs, kOpts.ladder_span);
  std::vector<std::int64_t> bins(static_cast<std::size_t>(h.rungs()), 0);
  std::vector<std::uint32_t> out(d.acc.size());
  std::vector<float> scratch(d.acc.size());
  exdyna::sparsifiers::select_threshold_ladder(d.acc, d.thr, 0, out.data(), h.grid(d.thr),
                                               bins.data(), scratch.data());
  const auto k = static_cast<std::int64_t>(kDensity * static_cast<double>(d.acc.size()));
  for (auto _ : st) {
    exdyna::sparsifiers::HistogramController c = h;
    benchmark::DoNotOptimize(c.next_threshold(d.thr, k, bins));
  }
}

}  // namespace

#define EXDYNA_OPTIONS_BENCH(fn) \
  BENCHMARK(fn)->Arg(4'194'304)->Arg(25'000'000)->Unit(benchmark::kMicrosecond)
EXDYNA_OPTIONS_BENCH(BM_paper_select);
EXDYNA_OPTIONS_BENCH(BM_ladder_select);
EXDYNA_OPTIONS_BENCH(BM_exact_select);
EXDYNA_OPTIONS_BENCH(BM_exact_select_capped);
EXDYNA_OPTIONS_BENCH(BM_ef_accumulate);
EXDYNA_OPTIONS_BENCH(BM_update);
EXDYNA_OPTIONS_BENCH(BM_exact_balance);
EXDYNA_OPTIONS_BENCH(BM_histogram_controller);
