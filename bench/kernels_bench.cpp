// Single-process kernel benchmarks (Google Benchmark): the selection kernels of every sparsifier
// and the error-feedback accumulate, on 1M and 25M floats, beside a plain memory-read pass
// measured in the same run. Absolute times on shared machines are noisy, so the binary ends with
// a table of ratios against that read pass (bandwidth, counting bytes read AND written) and of
// ExDyna's selection against Top-k.
//
//   exdyna_bench_kernels [--benchmark_repetitions=5] [--benchmark_filter=...]
//
// Times are CPU times (the machine may be shared; a descheduled thread's wait is not the
// kernel's), and with repetitions the table uses the medians.
// Inputs: Laplace-distributed values (scale 1, a fixed xorshift seed), the shape of gradients.
// Thresholds are set from the data to give 1% density, so every kernel does the same work.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "exdyna/core/topk_select.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna_options.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"
#include "exdyna/sparsifiers/exdyna/threshold.hpp"
#include "exdyna/sparsifiers/sidco.hpp"

namespace {

using exdyna::sparsifiers::Index;

constexpr std::int64_t kSizes[] = {1'000'000, 25'000'000};
constexpr double kDensity = 0.01;
constexpr int kWorkers = 8;  // ExDyna: one worker's partition is n_g / 8

std::vector<float> laplace(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  std::uint64_t s = seed;
  for (auto& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const double u = (static_cast<double>(s >> 11) + 0.5) / 9007199254740992.0;
    x = static_cast<float>(-std::log(u)) * ((s & 1) ? 1.0f : -1.0f);
  }
  return v;
}

// Inputs per size, built once and shared by every benchmark of that size.
struct Inputs {
  std::vector<float> acc;
  std::vector<float> grad;
  std::vector<float> residual;
  float thr_part = 0;  // 1% of the first n/8 elements reach it
  float thr_all = 0;   // 1% of all elements reach it
};

float quantile_threshold(std::span<const float> x, double density) {
  std::vector<float> a(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) a[i] = std::fabs(x[i]);
  const auto k = static_cast<std::size_t>(density * static_cast<double>(a.size()));
  std::nth_element(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(k), a.end(),
                   std::greater<>());
  return a[k];
}

Inputs& inputs(std::int64_t n) {
  static std::map<std::int64_t, Inputs> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  Inputs in;
  in.acc = laplace(static_cast<std::size_t>(n), 88172645463325252ull);
  in.grad = laplace(static_cast<std::size_t>(n), 0x9E3779B97F4A7C15ull);
  in.residual.assign(static_cast<std::size_t>(n), 0.0f);
  in.thr_part = quantile_threshold(
      std::span<const float>(in.acc).first(static_cast<std::size_t>(n / kWorkers)), kDensity);
  in.thr_all = quantile_threshold(in.acc, kDensity);
  return cache.emplace(n, std::move(in)).first->second;
}

// The reference: one read pass, a sum of floats in SSE2 (the instruction set the kernels are
// built for), so nothing but memory limits it.
float read_pass(std::span<const float> x) {
  const float* p = x.data();
  std::size_t i = 0;
  float s = 0;
#if defined(__SSE2__)
  // Eight independent accumulators: with fewer, the add latency, not memory, bounds the pass
  // when the data sits in cache.
  __m128 a[8];
  for (auto& v : a) v = _mm_setzero_ps();
  for (; i + 32 <= x.size(); i += 32)
    for (int j = 0; j < 8; ++j) a[j] = _mm_add_ps(a[j], _mm_loadu_ps(p + i + 4 * j));
  for (int j = 1; j < 8; ++j) a[0] = _mm_add_ps(a[0], a[j]);
  alignas(16) float l[4];
  _mm_store_ps(l, a[0]);
  s = (l[0] + l[1]) + (l[2] + l[3]);
#endif
  for (; i < x.size(); ++i) s += p[i];
  return s;
}

// Two arrays read in the same loop: sum of a[i] + b[i].
float read2_pass(std::span<const float> a, std::span<const float> b) {
  const float* p = a.data();
  const float* q = b.data();
  std::size_t i = 0;
  float s = 0;
#if defined(__SSE2__)
  __m128 v[8];
  for (auto& x : v) x = _mm_setzero_ps();
  for (; i + 16 <= a.size(); i += 16)
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm_add_ps(v[j], _mm_loadu_ps(p + i + 4 * j));
      v[4 + j] = _mm_add_ps(v[4 + j], _mm_loadu_ps(q + i + 4 * j));
    }
  for (int j = 1; j < 8; ++j) v[0] = _mm_add_ps(v[0], v[j]);
  alignas(16) float l[4];
  _mm_store_ps(l, v[0]);
  s = (l[0] + l[1]) + (l[2] + l[3]);
#endif
  for (; i < a.size(); ++i) s += p[i] + q[i];
  return s;
}

void BM_read(benchmark::State& st) {
  auto& in = inputs(st.range(0));
  const auto n = static_cast<std::size_t>(st.range(1));  // elements read: n_g, or n_g / 8
  const std::span<const float> x = std::span<const float>(in.acc).first(n);
  for (auto _ : st) benchmark::DoNotOptimize(read_pass(x));
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(n * sizeof(float)));
}

// A stricter reference for kernels that stream several arrays: one core often moves more bytes
// per second over two streams than over one (more misses in flight), so this reads two.
void BM_read2(benchmark::State& st) {
  auto& in = inputs(st.range(0));
  for (auto _ : st) benchmark::DoNotOptimize(read2_pass(in.acc, in.grad));
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(2 * in.acc.size() * sizeof(float)));
}

// ExDyna's selection of one worker for 8 workers: Alg. 4 over the worker's partition, n_g / 8.
void BM_exdyna_select_8w(benchmark::State& st) {
  auto& in = inputs(st.range(0));
  const auto part =
      std::span<const float>(in.acc).first(static_cast<std::size_t>(st.range(0) / kWorkers));
  std::vector<std::uint32_t> out(part.size());
  std::size_t c = 0;
  for (auto _ : st) {
    c = exdyna::sparsifiers::select_threshold(part, in.thr_part, 0, out.data());
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  st.counters["selected"] = static_cast<double>(c);
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(part.size_bytes() + c * sizeof(std::uint32_t)));
}

// The exact controller's selection kernel for the same worker: every |x| at or above
// the ladder's lowest rung (the steady quarter octave below the threshold) with the ladder's
// bins, then this worker's cut to its k_i = 1% of the partition (sparsifiers::take_cut). Not in it:
// the plan on the gathered ladders (microseconds, independent of n_g). Bytes as for
// exdyna_select_8w: the partition read and the k_i indices kept.
void BM_exdyna_exact_select_8w(benchmark::State& st) {
  auto& in = inputs(st.range(0));
  const auto part =
      std::span<const float>(in.acc).first(static_cast<std::size_t>(st.range(0) / kWorkers));
  std::vector<std::uint32_t> out(part.size());
  std::vector<std::uint8_t> subs(part.size());
  std::vector<float> abs(part.size());
  const exdyna::sparsifiers::ExDynaOptions opts;
  const exdyna::sparsifiers::HistogramController h(opts.ladder_rungs, opts.ladder_span);
  const auto grid = h.grid(in.thr_part);
  std::vector<std::int64_t> bins(static_cast<std::size_t>(h.rungs()));
  const auto k = static_cast<std::int64_t>(kDensity * static_cast<double>(part.size()));
  // As the sparsifier's one-pass path runs it: words where the kernel allows, else
  // indices and values.
  const bool words = exdyna::sparsifiers::ladder_words_fit(
      exdyna::sparsifiers::select_kernel_in_use(), part.size(), grid);
  std::size_t c = 0;
  for (auto _ : st) {
    std::fill(bins.begin(), bins.end(), 0);
    c = words ? exdyna::sparsifiers::collect_ladder_words(part, grid, out.data(), subs.data(),
                                                          bins.data())
              : exdyna::sparsifiers::collect_ladder_candidates(part, 0, grid, out.data(),
                                                               abs.data(), bins.data());
    const auto [rung, quota] = exdyna::sparsifiers::own_cut(bins, k);
    c = words
            ? exdyna::sparsifiers::take_cut_words(0, out.data(), subs.data(), c, grid, rung, quota)
            : exdyna::sparsifiers::take_cut(out.data(), abs.data(), c, grid, rung, quota);
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  st.counters["selected"] = static_cast<double>(c);
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(part.size_bytes() + c * sizeof(std::uint32_t)));
}

void topk(benchmark::State& st, exdyna::core::TopkMethod m) {
  auto& in = inputs(st.range(0));
  const auto k = static_cast<std::size_t>(kDensity * static_cast<double>(st.range(0)));
  std::vector<std::uint32_t> out;
  exdyna::core::TopkScratch scratch;
  for (auto _ : st) {
    exdyna::core::topk_select(in.acc, k, m, out, scratch);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetBytesProcessed(
      static_cast<std::int64_t>(st.iterations()) *
      static_cast<std::int64_t>(in.acc.size() * sizeof(float) + k * sizeof(std::uint32_t)));
}
void BM_topk_nth_element(benchmark::State& st) {
  topk(st, exdyna::core::TopkMethod::kNthElement);
}
void BM_topk_heap(benchmark::State& st) {
  topk(st, exdyna::core::TopkMethod::kHeap);
}

// SIDCo's estimate and selection (3 exponential stages) over the whole vector.
void BM_sidco(benchmark::State& st) {
  auto& in = inputs(st.range(0));
  std::vector<Index> idx;
  exdyna::sparsifiers::SidcoEstimate e;
  for (auto _ : st) {
    e = exdyna::sparsifiers::sidco_select(in.acc, kDensity, 3, idx);
    benchmark::DoNotOptimize(e);
  }
  st.counters["selected"] = static_cast<double>(e.count);
  // stages + 1 read passes (the mean, one per later stage, the selection), the indices written.
  st.counters["passes"] = e.stages_run + 1;
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(static_cast<std::size_t>(e.stages_run + 1) *
                                                     in.acc.size() * sizeof(float) +
                                                 e.count * sizeof(Index)));
}

// Hard threshold: one fixed threshold over the whole vector (here the one giving 1%).
void BM_hard_threshold(benchmark::State& st) {
  auto& in = inputs(st.range(0));
  std::vector<std::uint32_t> out(in.acc.size());
  std::size_t c = 0;
  for (auto _ : st) {
    c = exdyna::sparsifiers::select_threshold(in.acc, in.thr_all, 0, out.data());
    benchmark::DoNotOptimize(c);
    benchmark::ClobberMemory();
  }
  st.counters["selected"] = static_cast<double>(c);
  st.SetBytesProcessed(
      static_cast<std::int64_t>(st.iterations()) *
      static_cast<std::int64_t>(in.acc.size() * sizeof(float) + c * sizeof(std::uint32_t)));
}

// Error feedback: residual += grad in place, with the NaN/Inf check and the residual-norm sum.
// Reads residual and grad, writes residual: 12 bytes per element.
void BM_ef_accumulate(benchmark::State& st) {
  auto& in = inputs(st.range(0));
  for (auto _ : st) {
    auto r = exdyna::sparsifiers::accumulate(in.residual, in.grad);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations()) *
                       static_cast<std::int64_t>(3 * in.residual.size() * sizeof(float)));
  std::fill(in.residual.begin(), in.residual.end(), 0.0f);  // keep values bounded across runs
}

void register_all() {
  for (auto n : kSizes) {
    benchmark::RegisterBenchmark("read", BM_read)->Args({n, n})->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("read", BM_read)
        ->Args({n, n / kWorkers})
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("read2", BM_read2)->Arg(n)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("exdyna_select_8w", BM_exdyna_select_8w)
        ->Arg(n)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("exdyna_exact_select_8w", BM_exdyna_exact_select_8w)
        ->Arg(n)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("hard_threshold", BM_hard_threshold)
        ->Arg(n)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("sidco", BM_sidco)->Arg(n)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("ef_accumulate", BM_ef_accumulate)
        ->Arg(n)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("topk_nth_element", BM_topk_nth_element)
        ->Arg(n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("topk_heap", BM_topk_heap)->Arg(n)->Unit(benchmark::kMillisecond);
  }
}

// Collects every run while the usual reporter prints it, then prints the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      // With --benchmark_repetitions the median replaces the single runs.
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type != Run::RT_Iteration && !median) continue;
      const auto bps = r.counters.find("bytes_per_second");
      Row row;
      row.seconds = r.GetAdjustedCPUTime() / unit_scale(r.time_unit);
      row.gbps = bps == r.counters.end() ? 0 : bps->second.value / 1e9;
      rows_[r.run_name.str()] = row;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    print_table();
  }

 private:
  struct Row {
    double seconds = 0;
    double gbps = 0;
  };
  static double unit_scale(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kNanosecond:
        return 1e9;
      case benchmark::kMicrosecond:
        return 1e6;
      case benchmark::kMillisecond:
        return 1e3;
      default:
        return 1;
    }
  }
  const Row* find(const std::string& name) const {
    auto it = rows_.find(name);
    return it == rows_.end() ? nullptr : &it->second;
  }
  void print_table() const {
    std::printf(
        "\nRatios against the memory-read pass of this run (bandwidth counts bytes read and "
        "written;\n"
        "'read ref' is the read pass over the same number of elements the kernel reads;\n"
        "CPU time, medians when repeated).\n\n");
    std::printf("%-22s %10s %12s %10s %10s %11s\n", "kernel", "n_g", "time", "GB/s", "read ref",
                "ratio");
    for (auto n : kSizes) {
      const std::string sn = std::to_string(n);
      const Row* read_all = find("read/" + sn + "/" + sn);
      const Row* read_part = find("read/" + sn + "/" + std::to_string(n / kWorkers));
      const Row* read_two = find("read2/" + sn);
      auto line = [&](const char* kernel, const char* label, const Row* ref) {
        const Row* r = find(std::string(kernel) + "/" + sn);
        if (!r) return;
        std::printf("%-22s %10lld %10.3fms %10.2f", label, static_cast<long long>(n),
                    r->seconds * 1e3, r->gbps);
        if (ref && ref->gbps > 0)
          std::printf(" %10.2f %10.0f%%\n", ref->gbps, 100.0 * r->gbps / ref->gbps);
        else
          std::printf(" %10s %11s\n", "-", "-");
      };
      auto ref_line = [&](const char* label, const Row* r) {
        if (r)
          std::printf("%-22s %10lld %10.3fms %10.2f %10s %11s\n", label, static_cast<long long>(n),
                      r->seconds * 1e3, r->gbps, "", "100%");
      };
      ref_line("read (n_g)", read_all);
      ref_line("read (n_g/8)", read_part);
      ref_line("read 2 arrays (2 n_g)", read_two);
      line("exdyna_select_8w", "exdyna_select_8w", read_part);
      line("exdyna_exact_select_8w", "exdyna_exact_select_8w", read_part);
      line("hard_threshold", "hard_threshold", read_all);
      line("sidco", "sidco", read_all);
      line("ef_accumulate", "ef_accumulate", read_all);
      line("ef_accumulate", "  vs read 2 arrays", read_two);
      line("topk_nth_element", "topk_nth_element", read_all);
      line("topk_heap", "topk_heap", read_all);
      const Row* ex = find("exdyna_select_8w/" + sn);
      const Row* nth = find("topk_nth_element/" + sn);
      const Row* heap = find("topk_heap/" + sn);
      if (ex && ex->seconds > 0) {
        if (nth)
          std::printf("  ExDyna selection (8 workers) vs Top-k nth_element: %.0fx faster\n",
                      nth->seconds / ex->seconds);
        if (heap)
          std::printf("  ExDyna selection (8 workers) vs Top-k heap:        %.0fx faster\n",
                      heap->seconds / ex->seconds);
      }
    }
    std::fflush(stdout);
  }
  std::map<std::string, Row> rows_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // Which threshold-selection kernel the run-time dispatch picked on this CPU.
  benchmark::AddCustomContext(
      "select_kernel", exdyna::sparsifiers::to_string(exdyna::sparsifiers::select_kernel_in_use()));
  register_all();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
