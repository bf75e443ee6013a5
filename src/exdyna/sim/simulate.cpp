#include "exdyna/sim/simulate.hpp"

#include <algorithm>
#include <chrono>
#include <ostream>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/factory.hpp"

namespace exdyna::sim {

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
  const auto T = *cfg.iterations;
  res.steps.reserve(static_cast<std::size_t>(T));
  std::vector<float> grad(static_cast<std::size_t>(src.n_g()));
  double sums[3] = {0, 0, 0};  // select, non-comm, step
  for (std::int64_t t = 0; t < T; ++t) {
    src.fill(t, comm.rank(), grad);
    core::Stopwatch sw;
    const double cpu0 = core::thread_cpu_seconds();
    sparsifiers::StepStats st;
    try {
      st = ef.step(grad, comm);
    } catch (const DataError& e) {
      throw DataError(detail::concat(source_name(cfg), ": ", e.what()));
    }
    st.times.cpu = core::thread_cpu_seconds() - cpu0;
    sums[2] += sw.elapsed();
    sums[0] += st.times.select;
    sums[1] += st.times.non_comm();
    res.steps.push_back(std::move(st));
  }
  // The only collective outside the steps: mean timings over every worker.
  comm.allreduce_sum(std::span<double>(sums, 3));
  const double denom = static_cast<double>(T) * comm.size();
  res.mean_select_s = sums[0] / denom;
  res.mean_non_comm_s = sums[1] / denom;
  res.mean_step_s = sums[2] / denom;
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
  if (!cfg.decisions_path.empty())
    write_file_atomic(cfg.decisions_path, decisions_csv(result.steps, n));
  if (!cfg.stats_path.empty()) write_file_atomic(cfg.stats_path, stats_csv(result.steps, n));
  print_summary(os, cfg, src, summarize(cfg, result));
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
