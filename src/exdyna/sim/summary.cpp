#include "exdyna/sim/summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <span>
#include <tuple>

#include "exdyna/sim/simulate.hpp"

namespace exdyna::sim {

namespace {

Summary::Range range_of(std::span<const double> xs) {
  Summary::Range r;
  if (xs.empty()) return r;
  r.min = std::numeric_limits<double>::infinity();
  r.max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (double x : xs) {
    sum += x;
    r.min = std::min(r.min, x);
    r.max = std::max(r.max, x);
  }
  r.mean = sum / static_cast<double>(xs.size());
  return r;
}

}  // namespace

Summary summarize(const SimulateConfig& cfg, const WorkerResult& result) {
  Summary s;
  const StepSeries& series = result.series;
  s.iterations = series.size();
  // The target the sparsifier reports (dense reports 1), else the configured one.
  s.target_density = series.target_density() > 0 ? series.target_density() : cfg.sparse.density;
  s.k_target = series.k_target() > 0 ? series.k_target() : cfg.sparse.k();
  std::vector<double> ratio(series.density());
  for (double& r : ratio) r /= s.target_density;
  const std::vector<double>& ft = series.f_t();
  const std::vector<double>& ge = series.global_error();
  s.density_ratio = range_of(ratio);
  s.f_t = range_of(ft);
  s.global_error =
      ge.empty() ? Summary::Range{std::nan(""), std::nan(""), std::nan("")} : range_of(ge);
  if (s.iterations > 0) {
    const auto n = static_cast<std::uint64_t>(s.iterations);
    const comm::ByteCounts& bytes = series.bytes();
    s.mean_bytes = static_cast<double>(bytes.total()) / static_cast<double>(n);
    s.mean_bytes_by_kind.allgather_counts = bytes.allgather_counts / n;
    s.mean_bytes_by_kind.allgather_indices = bytes.allgather_indices / n;
    s.mean_bytes_by_kind.allreduce = bytes.allreduce / n;
    s.mean_bytes_by_kind.broadcast = bytes.broadcast / n;
    s.mean_bytes_by_kind.alltoall = bytes.alltoall / n;
    s.mean_bytes_by_kind.padded_elements = bytes.padded_elements / n;
    s.mean_padded_elements = series.padded_elements() / static_cast<double>(n);
  }
  const auto within = [&](std::size_t t) { return std::fabs(ratio[t] - 1.0) <= 0.1; };
  // First iteration >= from within the band, and the first from which it stays until `to`.
  const auto first_and_settled = [&](std::size_t from, std::size_t to) {
    std::pair<std::int64_t, std::int64_t> r{-1, -1};
    for (std::size_t t = from; t < to && r.first < 0; ++t)
      if (within(t)) r.first = static_cast<std::int64_t>(t);
    for (std::size_t t = to; t > from && within(t - 1); --t)
      r.second = static_cast<std::int64_t>(t - 1);
    return r;
  };
  std::tie(s.first_within, s.settled_at) = first_and_settled(0, ratio.size());
  if (s.iterations > Summary::kWarmup) {
    const auto w = static_cast<std::size_t>(Summary::kWarmup);
    s.density_ratio_after_warmup = range_of(std::span<const double>(ratio).subspan(w)).mean;
    s.f_t_after_warmup = range_of(std::span<const double>(ft).subspan(w)).mean;
  } else {
    s.density_ratio_after_warmup = s.f_t_after_warmup = std::nan("");
  }
  {
    // Scale steps of either source (a trace replays them through ScaledSource).
    auto steps_sorted = cfg.synthetic.scale_steps;
    std::sort(steps_sorted.begin(), steps_sorted.end(),
              [](const ScaleStep& a, const ScaleStep& b) { return a.iteration < b.iteration; });
    for (std::size_t j = 0; j < steps_sorted.size(); ++j) {
      const auto& st = steps_sorted[j];
      if (st.iteration <= 0 || st.iteration >= s.iterations) continue;
      // Up to the next step (or the end of the run).
      std::int64_t end = s.iterations;
      if (j + 1 < steps_sorted.size())
        end = std::min(end, std::max(st.iteration, steps_sorted[j + 1].iteration));
      const auto [first, settled] =
          first_and_settled(static_cast<std::size_t>(st.iteration), static_cast<std::size_t>(end));
      s.recoveries.push_back({st.iteration, st.factor, first < 0 ? -1 : first - st.iteration,
                              settled < 0 ? -1 : settled - st.iteration});
    }
  }
  const std::int64_t nw = std::min<std::int64_t>(10, s.iterations);
  for (std::int64_t w = 0; w < nw; ++w) {
    Summary::Window win;
    win.begin = s.iterations * w / nw;
    win.end = s.iterations * (w + 1) / nw;
    const auto b = static_cast<std::size_t>(win.begin), e = static_cast<std::size_t>(win.end);
    win.density_ratio = range_of(std::span<const double>(ratio).subspan(b, e - b));
    win.mean_f_t = range_of(std::span<const double>(ft).subspan(b, e - b)).mean;
    s.windows.push_back(win);
  }
  s.mean_select_s = result.mean_select_s;
  s.mean_non_comm_s = result.mean_non_comm_s;
  s.mean_step_s = result.mean_step_s;
  s.wall_s = result.wall_s;
  return s;
}

void print_summary(std::ostream& os, const SimulateConfig& cfg, const GradientSource& src,
                   const Summary& s) {
  char line[256];
  auto out = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    os << line;
  };
  const std::string source = cfg.describe_source();
  os << "exdyna simulate: " << cfg.sparsifier << " on " << cfg.workers.value_or(0) << " workers, "
     << s.iterations << " iterations, n_g = " << src.n_g() << " from " << source << "\n";
  out("target density %.6g (k = %lld), gather %s\n", s.target_density,
      static_cast<long long>(s.k_target), comm::to_string(cfg.sparse.gather_mode));
  if (cfg.sparsifier == "dgc")  // the optimizer's part of DGC needs a model (train/dgc_momentum)
    os << "dgc: the selection alone; momentum correction and masking run in `exdyna train`\n";
  os << "\n";
  out("%-28s %12s %12s %12s\n", "", "mean", "min", "max");
  out("%-28s %12.4f %12.4f %12.4f\n", "actual density / target", s.density_ratio.mean,
      s.density_ratio.min, s.density_ratio.max);
  out("%-28s %12.4f %12.4f %12.4f\n", "f(t)", s.f_t.mean, s.f_t.min, s.f_t.max);
  out("%-28s %12.4g %12.4g %12.4g\n", "global error (Eq. 1)", s.global_error.mean,
      s.global_error.min, s.global_error.max);
  os << "\n";
  out("%-28s %12.4f ms\n", "selection time", s.mean_select_s * 1e3);
  out("%-28s %12.4f ms\n", "non-communication time", s.mean_non_comm_s * 1e3);
  out("%-28s %12.4f ms\n", "step time (with waits)", s.mean_step_s * 1e3);
  out("%-28s %12.0f (counts %llu, indices %llu, values %llu, broadcast %llu%s)\n",
      "bytes per iteration", s.mean_bytes,
      static_cast<unsigned long long>(s.mean_bytes_by_kind.allgather_counts),
      static_cast<unsigned long long>(s.mean_bytes_by_kind.allgather_indices),
      static_cast<unsigned long long>(s.mean_bytes_by_kind.allreduce),
      static_cast<unsigned long long>(s.mean_bytes_by_kind.broadcast),
      s.mean_bytes_by_kind.alltoall
          ? (", all-to-all " + std::to_string(s.mean_bytes_by_kind.alltoall)).c_str()
          : "");
  out("%-28s %12.1f\n", "padded elements", s.mean_padded_elements);
  if (s.first_within >= 0)
    out("%-28s %12lld\n", "first within +-10% at", static_cast<long long>(s.first_within));
  else
    out("%-28s %12s\n", "first within +-10% at", "never");
  if (s.settled_at >= 0)
    out("%-28s %12lld\n", "stays within +-10% from", static_cast<long long>(s.settled_at));
  else
    out("%-28s %12s\n", "stays within +-10% from", "never");
  for (const auto& r : s.recoveries) {
    char what[64];
    std::snprintf(what, sizeof what, "after x%g at %lld: back in", r.factor,
                  static_cast<long long>(r.iteration));
    out("%-28s %12lld iterations, stays from %lld\n", what, static_cast<long long>(r.first_within),
        static_cast<long long>(r.settled));
  }
  out("%-28s %12.4f\n", "density / target from it. 10", s.density_ratio_after_warmup);
  out("%-28s %12.4f\n", "f(t) from iteration 10", s.f_t_after_warmup);
  out("%-28s %12.2f s\n", "wall time", s.wall_s);
  os << "(times are per worker and iteration, means over workers; bytes are per worker)\n\n";
  out("%-16s %12s %12s %12s %12s\n", "iterations", "density/d", "min", "max", "f(t)");
  for (const auto& w : s.windows) {
    char span[40];
    std::snprintf(span, sizeof span, "%lld-%lld", static_cast<long long>(w.begin),
                  static_cast<long long>(w.end - 1));
    out("%-16s %12.4f %12.4f %12.4f %12.4f\n", span, w.density_ratio.mean, w.density_ratio.min,
        w.density_ratio.max, w.mean_f_t);
  }
}

}  // namespace exdyna::sim
