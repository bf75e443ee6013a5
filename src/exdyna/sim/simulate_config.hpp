// The configuration of `exdyna simulate`: what to run (sparsifier, workers, iterations), on which
// gradient source (synthetic or a trace), and where the outputs go; and the source it names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "exdyna/sim/gradient_source.hpp"
#include "exdyna/sim/synthetic_source.hpp"
#include "exdyna/sparsifiers/config.hpp"

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
  // Keep every iteration's StepStats (the CSVs are written from them at the end). The command
  // keeps them only when a CSV is asked for; without, a run holds the compact StepSeries alone.
  bool keep_steps = true;
  // Sample resident memory and open descriptors after iteration min(1000, T/2) and at the end,
  // on every rank (--resources).
  bool measure_resources = false;

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

// The source in messages: "synthetic source" or "trace 'DIR'".
std::string source_name(const SimulateConfig& cfg);

// An output file must be creatable, checked before a long run rather than after it: throws
// InvalidArgument naming `option` where p's directory does not exist or p is a directory. An empty
// p passes (nothing asked).
void check_output_path(const std::filesystem::path& p, const char* option);

}  // namespace exdyna::sim
