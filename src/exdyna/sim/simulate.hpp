// `exdyna simulate`: N workers run T iterations of error feedback around one sparsifier on one
// gradient source (synthetic or a trace), and the run is summarised.
//
// The driver is engine-agnostic. run_worker() is everything one worker does, given its
// Communicator: the in-process runner calls it from one thread per rank (comm::run_local), and a
// multi-process engine (MPI, Gloo) calls it once per process. Every rank ends with identical
// records except for the timings, so rank 0's records are the run's; only the mean timings are
// all-reduced, once, at the end. Outputs derived from the records (the decisions CSV) are
// byte-identical across engines: doubles are printed with %.17g.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/core/atomic_file.hpp"
#include "exdyna/sim/gradient_source.hpp"
#include "exdyna/sim/synthetic_source.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sim {

struct SimulateConfig {
  // Defaults of the command. 2^20 gradients on 8 workers for 1000 iterations runs in well under a
  // minute on two cores and is long enough for the paper's controller (at most 0.5% per
  // iteration) to bring the density from its first threshold to the target.
  static constexpr int kDefaultWorkers = 8;
  static constexpr std::int64_t kDefaultNg = std::int64_t{1} << 20;
  static constexpr std::int64_t kDefaultIterations = 1000;

  std::string sparsifier = "exdyna";
  // density, gather_mode, exdyna, hard_threshold, sidco; n_g, world_size and rank are set per
  // worker from the source and the communicator.
  sparsifiers::SparsifierConfig sparse;
  std::optional<int> workers;              // unset: kDefaultWorkers, or the trace's
  std::optional<std::int64_t> iterations;  // unset: kDefaultIterations, or the trace's
  std::optional<std::int64_t> n_grad;      // synthetic only; unset: kDefaultNg
  std::filesystem::path trace_dir;         // non-empty: replay this trace
  std::uint64_t seed = 1;                  // the synthetic source's
  // Its n_g and seed come from n_grad and seed. Its scale_steps apply to a trace too (make_source
  // wraps the trace in a ScaledSource), so a learning-rate-decay-like step works on either source.
  SyntheticOptions synthetic;
  std::filesystem::path decisions_path;  // non-empty: the decisions CSV
  std::filesystem::path stats_path;      // non-empty: the full per-iteration CSV
  double timeout_s = 300;                // of every collective
  bool measure_global_error = true;      // Eq. 1, one all-reduce of a double per step

  // Checks what can be checked without the source (ranges, conflicting options, output
  // directories). Throws InvalidArgument naming the option, the value and what was expected.
  void validate() const;
  // The synthetic options this config asks for (n_g and seed filled in).
  SyntheticOptions synthetic_options() const;
  // The source in words, scale steps included (the summary's header, the engines' fingerprint).
  std::string describe_source() const;
};

// The synthetic source, or the trace when trace_dir is set (scaled when scale steps are given).
std::unique_ptr<GradientSource> make_source(const SimulateConfig& cfg);

// cfg with workers, iterations and n_grad filled in from the source and the defaults, validated
// against it (a trace fixes workers and n_g; --iterations may be fewer than it holds) and the
// sparsifier's configuration validated for world size `workers`.
SimulateConfig resolve(SimulateConfig cfg, const GradientSource& src);

struct WorkerResult {
  std::vector<sparsifiers::StepStats> steps;  // this rank's, one per iteration
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
  // The same means from iteration kWarmup on (issue 5 judges a controller after a short warm-up);
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

// The decisions CSV: iter,threshold,k_total,density,f_t,k_w0..,alloc_w0..,blocks_p0.. (alloc -1
// and blocks 0 for sparsifiers without partitions). Doubles as %.17g.
std::string decisions_csv(std::span<const sparsifiers::StepStats> steps, int workers);
// Every StepStats field, one row per iteration (this rank's times).
std::string stats_csv(std::span<const sparsifiers::StepStats> steps, int workers);
// The CSV writers use core's atomic writer (temporary beside path, fsync, rename).
using core::write_file_atomic;

// Writes the CSVs that cfg asks for from rank 0's result and prints the summary.
void report(std::ostream& os, const SimulateConfig& cfg, const GradientSource& src,
            const WorkerResult& result);

// The whole in-process command: make_source, resolve, run_in_process, report. Returns 0.
int simulate(const SimulateConfig& cfg, const sparsifiers::Registry& registry, std::ostream& os);

}  // namespace exdyna::sim
