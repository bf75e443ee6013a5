#include "exdyna/sim/select_bench.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sim/simulate.hpp"

namespace exdyna::sim {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return 0.5 * (*mid + *std::max_element(v.begin(), mid));
}

SimulateConfig mode_config(SimulateConfig cfg, bool exact) {
  cfg.sparsifier = "exdyna";
  auto& o = cfg.sparse.exdyna;
  o.controller = exact ? core::Controller::kExact : core::Controller::kPaper;
  o.balance = exact ? core::Balance::kExact : core::Balance::kPaper;
  o.worker_cap = exact ? core::ExDynaOptions::kAutoCap : 0.0;
  cfg.measure_global_error = false;  // one all-reduce per step the benchmark does not need
  cfg.decisions_path.clear();
  cfg.stats_path.clear();
  return cfg;
}

// One replay: every worker's select CPU time per iteration, appended to the mode's series.
void replay(const SimulateConfig& cfg, SelectBenchMode& mode) {
  auto src = make_source(cfg);
  const auto run = resolve(cfg, *src);
  const int n = *run.workers;
  const auto T = static_cast<std::size_t>(*run.iterations);
  std::vector<std::vector<double>> cpu(static_cast<std::size_t>(n));
  double density = 0;
  std::mutex mu;
  comm::run_local(
      n,
      [&](comm::Communicator& c) {
        auto r = run_worker(run, sparsifiers::builtin_registry(), *src, c);
        std::vector<double> mine;
        for (const auto& st : r.steps) mine.push_back(st.times.select_cpu);
        std::lock_guard<std::mutex> lock(mu);
        cpu[static_cast<std::size_t>(c.rank())] = std::move(mine);
        if (c.rank() == 0)
          for (const auto& st : r.steps)
            density += static_cast<double>(st.k_total) / static_cast<double>(st.k_target);
      },
      std::chrono::milliseconds(static_cast<std::int64_t>(run.timeout_s * 1000.0)));
  for (std::size_t t = 0; t < T; ++t) {
    double sum = 0, top = 0;
    for (const auto& w : cpu) {
      sum += w[t];
      top = std::max(top, w[t]);
    }
    mode.mean_per_iteration.push_back(sum / n);
    mode.max_per_iteration.push_back(top);
  }
  mode.mean_density += density / static_cast<double>(T);
}

}  // namespace

SelectBenchResult bench_select(const SimulateConfig& cfg, int repeat) {
  EXDYNA_CHECK_ARG(repeat >= 1, "--repeat: ", repeat, " is not valid; expected an integer >= 1");
  SelectBenchResult res;
  res.paper.name = "paper";
  res.exact.name = "exact";
  const auto paper = mode_config(cfg, false), exact = mode_config(cfg, true);
  for (int r = 0; r < repeat; ++r) {  // alternating, so a slow spell of the machine hits both
    replay(paper, res.paper);
    replay(exact, res.exact);
  }
  for (auto* m : {&res.paper, &res.exact}) {
    m->median_mean_s = median(m->mean_per_iteration);
    m->median_max_s = median(m->max_per_iteration);
    m->mean_density /= repeat;
  }
  return res;
}

}  // namespace exdyna::sim
