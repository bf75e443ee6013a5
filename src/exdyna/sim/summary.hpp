// The summary of a `exdyna simulate` run: density against the target, f(t), global error, bytes,
// times, how fast the density settles (also after scale steps), and the table printing it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <vector>

#include "exdyna/comm/byte_counts.hpp"
#include "exdyna/sim/gradient_source.hpp"
#include "exdyna/sim/simulate_config.hpp"

namespace exdyna::sim {

struct WorkerResult;  // simulate.hpp

// Numbers of the summary table.
struct Summary {
  struct Range {
    double mean = 0, min = 0, max = 0;
  };
  std::int64_t iterations = 0;
  double target_density = 0;
  std::int64_t k_target = 0;
  Range density_ratio;  // actual density / target
  Range f_t;
  Range global_error;     // NaN when not measured
  double mean_bytes = 0;  // per worker and iteration, every collective of the sparsifier
  comm::ByteCounts mean_bytes_by_kind;  // the same, per collective (integer means)
  double mean_padded_elements = 0;
  // First iteration within +-10% of the target (-1: none), and the first from which every later
  // one is (-1 when the last iteration is not).
  std::int64_t first_within = -1;
  std::int64_t settled_at = -1;
  // The same means from iteration kWarmup on (a controller is judged after a short warm-up);
  // NaN when the run is not longer than that.
  static constexpr std::int64_t kWarmup = 10;
  double density_ratio_after_warmup = 0;
  double f_t_after_warmup = 0;
  // For each scale step inside the run (synthetic source or trace): iterations from the step until
  // the density is first back within +-10% (-1: never), and until it stays there (-1: it does not).
  struct Recovery {
    std::int64_t iteration = 0;
    double factor = 1;
    std::int64_t first_within = -1, settled = -1;
  };
  std::vector<Recovery> recoveries;
  struct Window {
    std::int64_t begin = 0, end = 0;  // [begin, end)
    Range density_ratio;
    double mean_f_t = 0;
  };
  std::vector<Window> windows;  // up to 10 consecutive windows, to show the density settling
  double mean_select_s = 0, mean_non_comm_s = 0, mean_step_s = 0, wall_s = 0;
};
Summary summarize(const SimulateConfig& cfg, const WorkerResult& result);
void print_summary(std::ostream& os, const SimulateConfig& cfg, const GradientSource& src,
                   const Summary& s);

}  // namespace exdyna::sim
