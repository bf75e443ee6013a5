// Issue 12: the selection's CPU time on recorded gradients. Replays one gradient source (a trace
// or the synthetic generator) through ExDyna twice, in paper mode (Alg. 4's threshold scan, Alg. 5
// and Alg. 3) and with the exact controller (--controller exact --balance exact --worker-cap
// auto), one thread per worker over the in-process group, and compares the selection's CPU time
// per worker (StepStats::times.select_cpu: the thread's CPU clock, so W workers sharing two
// cores do not inflate it, as they do wall time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exdyna/sim/simulate_config.hpp"

namespace exdyna::sim {

struct SelectBenchMode {
  std::string name;  // "paper" or "exact"
  // Per iteration and repetition: the mean over workers, and the max over workers, in seconds.
  std::vector<double> mean_per_iteration, max_per_iteration;
  double median_mean_s = 0;  // median over iterations (and repetitions) of the mean
  double median_max_s = 0;   // of the max
  double mean_density = 0;   // k' / (d n_g) over the run (a check that both modes ran as meant)
};

struct SelectBenchResult {
  SelectBenchMode paper, exact;
  double ratio_mean() const { return exact.median_mean_s / paper.median_mean_s; }
  double ratio_max() const { return exact.median_max_s / paper.median_max_s; }
};

// cfg: the source, workers, iterations and density as for `exdyna simulate` (its sparsifier
// options are replaced by each mode's). repeat >= 1 replays of each mode, alternating.
SelectBenchResult bench_select(const SimulateConfig& cfg, int repeat);

}  // namespace exdyna::sim
