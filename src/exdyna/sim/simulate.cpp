#include "exdyna/sim/simulate.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ostream>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/huge_pages.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sim/process_resources.hpp"
#include "exdyna/sparsifiers/factory.hpp"

namespace exdyna::sim {

namespace {

// One line per rank: resident memory and descriptors after the warm-up and at the end.
void print_resources(std::ostream& os, const std::vector<RankResources>& ranks) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const RankResources& x = ranks[r];
    char line[200];
    std::snprintf(line, sizeof line,
                  "resources: rank %zu resident %.1f MiB after iteration %lld, %.1f MiB at the "
                  "end (%+.2f %%); open descriptors %lld, %lld\n",
                  r, static_cast<double>(x.rss_warm) / 1048576.0,
                  static_cast<long long>(x.warm_iteration),
                  static_cast<double>(x.rss_end) / 1048576.0, 100.0 * x.rss_growth(),
                  static_cast<long long>(x.fds_warm), static_cast<long long>(x.fds_end));
    os << line;
  }
}

}  // namespace

WorkerResult run_worker(const SimulateConfig& cfg, const sparsifiers::Registry& registry,
                        GradientSource& src, comm::Communicator& comm) {
  EXDYNA_CHECK_ARG(cfg.workers && cfg.iterations && cfg.n_grad,
                   "simulate: run_worker needs a resolved config");
  EXDYNA_CHECK_ARG(comm.size() == *cfg.workers, "simulate: the communicator has ", comm.size(),
                   " ranks, the run expects ", *cfg.workers, " workers");
  EXDYNA_CHECK_ARG(src.n_g() == *cfg.n_grad, "simulate: the source has n_g = ", src.n_g(),
                   ", the run expects ", *cfg.n_grad);
  comm.set_timeout(std::chrono::milliseconds(static_cast<std::int64_t>(cfg.timeout_s * 1000.0)));
  core::Stopwatch wall;

  sparsifiers::ErrorFeedbackOptions efo;
  efo.measure_global_error = cfg.measure_global_error;
  auto ef = sparsifiers::make_error_feedback(cfg.sparsifier, cfg.sparse, src.n_g(), comm.size(),
                                             comm.rank(), registry, efo);

  WorkerResult res;
  res.series = StepSeries(comm.size());
  const auto T = *cfg.iterations;
  res.series.reserve(T);
  if (cfg.keep_steps) res.steps.reserve(static_cast<std::size_t>(T));
  RankResources mine;
  mine.warm_iteration = std::min<std::int64_t>(1000, T / 2);
  const auto sample = [&](std::int64_t& rss, std::int64_t& fds) {
    rss = resident_bytes();
    fds = open_descriptors();
  };
  if (cfg.measure_resources && mine.warm_iteration == 0) sample(mine.rss_warm, mine.fds_warm);
  std::vector<float> grad;
  core::resize_huge(grad, static_cast<std::size_t>(src.n_g()));
  double sums[3] = {0, 0, 0};  // select, non-comm, step
  for (std::int64_t t = 0; t < T; ++t) {
    src.fill(t, comm.rank(), grad);
    core::Stopwatch sw;
    const double cpu0 = core::thread_cpu_seconds(), comm_cpu0 = comm.cpu_seconds();
    sparsifiers::StepStats st;
    try {
      st = ef.step(grad, comm);
    } catch (const DataError& e) {
      throw DataError(detail::concat(source_name(cfg), ": ", e.what()));
    }
    st.times.cpu = core::thread_cpu_seconds() - cpu0;
    st.times.cpu_comm = comm.cpu_seconds() - comm_cpu0;
    sums[2] += sw.elapsed();
    sums[0] += st.times.select;
    sums[1] += st.times.non_comm();
    res.series.add(st);
    if (cfg.keep_steps) res.steps.push_back(std::move(st));
    if (cfg.measure_resources && t + 1 == mine.warm_iteration) sample(mine.rss_warm, mine.fds_warm);
  }
  if (cfg.measure_resources) sample(mine.rss_end, mine.fds_end);
  // The only collective outside the steps: mean timings over every worker, and with them every
  // rank's resource samples (each rank fills its own slots; the sum gathers them).
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<double> buf(3 + (cfg.measure_resources ? 4 * n : 0), 0.0);
  std::copy(sums, sums + 3, buf.begin());
  if (cfg.measure_resources) {
    double* at = buf.data() + 3 + 4 * static_cast<std::size_t>(comm.rank());
    at[0] = static_cast<double>(mine.rss_warm), at[1] = static_cast<double>(mine.rss_end);
    at[2] = static_cast<double>(mine.fds_warm), at[3] = static_cast<double>(mine.fds_end);
  }
  comm.allreduce_sum(std::span<double>(buf));
  const double denom = static_cast<double>(T) * comm.size();
  res.mean_select_s = buf[0] / denom;
  res.mean_non_comm_s = buf[1] / denom;
  res.mean_step_s = buf[2] / denom;
  for (std::size_t r = 0; cfg.measure_resources && r < n; ++r) {
    const double* at = buf.data() + 3 + 4 * r;
    RankResources rr;
    rr.warm_iteration = mine.warm_iteration;
    rr.rss_warm = static_cast<std::int64_t>(at[0]), rr.rss_end = static_cast<std::int64_t>(at[1]);
    rr.fds_warm = static_cast<std::int64_t>(at[2]), rr.fds_end = static_cast<std::int64_t>(at[3]);
    res.resources.push_back(rr);
  }
  res.wall_s = wall.elapsed();
  return res;
}

WorkerResult run_in_process(const SimulateConfig& cfg, const sparsifiers::Registry& registry,
                            GradientSource& src) {
  EXDYNA_CHECK_ARG(cfg.workers, "simulate: run_in_process needs a resolved config");
  WorkerResult rank0;
  comm::run_local(
      *cfg.workers,
      [&](comm::Communicator& c) {
        auto r = run_worker(cfg, registry, src, c);
        if (c.rank() == 0) rank0 = std::move(r);
      },
      std::chrono::milliseconds(static_cast<std::int64_t>(cfg.timeout_s * 1000.0)));
  return rank0;
}

void report(std::ostream& os, const SimulateConfig& cfg, const GradientSource& src,
            const WorkerResult& result) {
  const int n = cfg.workers.value_or(0);
  const bool csv = !cfg.decisions_path.empty() || !cfg.stats_path.empty();
  EXDYNA_CHECK_ARG(!csv || cfg.keep_steps,
                   "simulate: a CSV output needs the run to keep its steps (keep_steps)");
  if (!cfg.decisions_path.empty())
    write_file_atomic(cfg.decisions_path, decisions_csv(result.steps, n));
  if (!cfg.stats_path.empty()) write_file_atomic(cfg.stats_path, stats_csv(result.steps, n));
  print_summary(os, cfg, src, summarize(cfg, result));
  os << "decisions digest: " << digest_hex(result.series.decisions_fnv1a())
     << " (FNV-1a of the decisions CSV)\n";
  print_resources(os, result.resources);
  if (!cfg.decisions_path.empty()) os << "decisions: " << cfg.decisions_path.string() << "\n";
  if (!cfg.stats_path.empty()) os << "statistics: " << cfg.stats_path.string() << "\n";
}

int simulate(const SimulateConfig& config, const sparsifiers::Registry& registry,
             std::ostream& os) {
  config.validate();
  registry.require(config.sparsifier);  // before the source is built
  auto src = make_source(config);
  const SimulateConfig cfg = resolve(config, *src);
  const WorkerResult result = run_in_process(cfg, registry, *src);
  report(os, cfg, *src, result);
  return 0;
}

}  // namespace exdyna::sim
