// `exdyna simulate`: N workers run T iterations of error feedback around one sparsifier on one
// gradient source (synthetic or a trace), and the run is summarised.
//
// The driver is engine-agnostic. run_worker() is everything one worker does, given its
// Communicator: the in-process runner calls it from one thread per rank (comm::run_local), and a
// multi-process engine (MPI, Gloo) calls it once per process. Every rank ends with identical
// records except for the timings, so rank 0's records are the run's; only the mean timings are
// all-reduced, once, at the end. Outputs derived from the records (the decisions CSV) are
// byte-identical across engines: doubles are printed with %.17g.
//
// Its parts: simulate_config (the configuration and its source), summary (the numbers and the
// table), step_csv (the CSVs, written by core/atomic_file), step_series (what is kept of every
// iteration when the StepStats are not). This header includes them all.
#pragma once

#include <iosfwd>
#include <vector>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/core/atomic_file.hpp"
#include "exdyna/sim/gradient_source.hpp"
#include "exdyna/sim/simulate_config.hpp"
#include "exdyna/sim/step_csv.hpp"
#include "exdyna/sim/step_series.hpp"
#include "exdyna/sim/summary.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sim {

// The CSV writers use core's atomic writer (temporary beside path, fsync, rename).
using core::write_file_atomic;

// One rank's resident memory and open descriptors after the warm-up iterations and at the end.
struct RankResources {
  std::int64_t warm_iteration = 0;  // sampled after this iteration
  std::int64_t rss_warm = 0, rss_end = 0;
  std::int64_t fds_warm = 0, fds_end = 0;
  double rss_growth() const {
    return rss_warm > 0 ? static_cast<double>(rss_end - rss_warm) / static_cast<double>(rss_warm)
                        : 0.0;
  }
};

struct WorkerResult {
  std::vector<sparsifiers::StepStats> steps;  // this rank's, one per iteration (cfg.keep_steps)
  StepSeries series;                          // always
  std::vector<RankResources> resources;       // per rank (cfg.measure_resources), else empty
  // Over every worker and iteration (all-reduced once at the end of the run), seconds.
  double mean_select_s = 0;
  double mean_non_comm_s = 0;
  double mean_step_s = 0;  // the whole error-feedback step
  double wall_s = 0;       // this rank's wall time of the run, source included
};

// One worker's whole run: builds the sparsifier from `registry` (n_g from src, world size and
// rank from comm), then for t = 0..T-1 fills its gradient from src and steps error feedback.
// cfg must be resolved. Collective: every rank of comm calls it with equal cfg. A non-finite
// gradient throws DataError naming the source, element, iteration and rank.
WorkerResult run_worker(const SimulateConfig& cfg, const sparsifiers::Registry& registry,
                        GradientSource& src, comm::Communicator& comm);

// run_worker on cfg.workers threads over an in-process group; returns rank 0's result.
WorkerResult run_in_process(const SimulateConfig& cfg, const sparsifiers::Registry& registry,
                            GradientSource& src);

// Writes the CSVs that cfg asks for from rank 0's result and prints the summary.
void report(std::ostream& os, const SimulateConfig& cfg, const GradientSource& src,
            const WorkerResult& result);

// The whole in-process command: make_source, resolve, run_in_process, report. Returns 0.
int simulate(const SimulateConfig& cfg, const sparsifiers::Registry& registry, std::ostream& os);

}  // namespace exdyna::sim
