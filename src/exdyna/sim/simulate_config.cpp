#include "exdyna/sim/simulate_config.hpp"

#include <cmath>
#include <sstream>

#include "exdyna/core/error.hpp"
#include "exdyna/sim/scaled_source.hpp"
#include "exdyna/sim/trace_source.hpp"
#include "exdyna/sparsifiers/factory.hpp"

namespace exdyna::sim {

namespace fs = std::filesystem;

void check_output_path(const fs::path& p, const char* option) {
  if (p.empty()) return;
  std::error_code ec;
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  EXDYNA_CHECK_ARG(fs::is_directory(parent, ec), option, " '", p.string(), "': directory '",
                   parent.string(), "' does not exist; expected a file in an existing directory");
  EXDYNA_CHECK_ARG(!fs::is_directory(p, ec), option, " '", p.string(),
                   "' is a directory; expected a file name");
}

namespace {

// The scale steps as the synthetic source's describe() lists them.
std::string describe_steps(std::span<const ScaleStep> steps) {
  std::ostringstream os;
  for (const auto& s : steps) os << ", x" << s.factor << " at " << s.iteration;
  return os.str();
}

}  // namespace

std::string source_name(const SimulateConfig& cfg) {
  return cfg.trace_dir.empty() ? std::string("synthetic source")
                               : "trace '" + cfg.trace_dir.string() + "'";
}

void SimulateConfig::validate() const {
  EXDYNA_CHECK_ARG(!sparsifier.empty(),
                   "sparsifier name is empty; expected one of the registered names");
  EXDYNA_CHECK_ARG(!workers || (*workers >= 1 && *workers <= 4096), "--workers ",
                   workers.value_or(0), " is not valid; expected 1..4096");
  EXDYNA_CHECK_ARG(!iterations || *iterations >= 1, "--iterations ", iterations.value_or(0),
                   " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(std::isfinite(timeout_s) && timeout_s > 0, "--timeout ", timeout_s,
                   " s is not valid; expected a finite number of seconds > 0");
  if (!trace_dir.empty()) {
    EXDYNA_CHECK_ARG(!n_grad, "--n-grad ", n_grad.value_or(0), " and --trace '", trace_dir.string(),
                     "' conflict; expected one of them (a trace fixes n_g in its meta.json)");
    validate_scale_steps(synthetic.scale_steps);
  } else {
    synthetic_options().validate();
  }
  check_output_path(decisions_path, "--decisions");
  check_output_path(stats_path, "--stats");
}

SyntheticOptions SimulateConfig::synthetic_options() const {
  SyntheticOptions o = synthetic;
  o.n_g = n_grad.value_or(kDefaultNg);
  o.seed = seed;
  return o;
}

std::string SimulateConfig::describe_source() const {
  if (trace_dir.empty()) return synthetic_options().describe();
  return "trace '" + trace_dir.string() + "'" + describe_steps(synthetic.scale_steps);
}

std::unique_ptr<GradientSource> make_source(const SimulateConfig& cfg) {
  if (!cfg.trace_dir.empty()) {
    auto trace = std::make_unique<TraceSource>(cfg.trace_dir);
    if (cfg.synthetic.scale_steps.empty()) return trace;
    return std::make_unique<ScaledSource>(std::move(trace), cfg.synthetic.scale_steps);
  }
  return std::make_unique<SyntheticSource>(cfg.synthetic_options());
}

SimulateConfig resolve(SimulateConfig cfg, const GradientSource& src) {
  cfg.validate();
  if (src.workers() > 0) {
    EXDYNA_CHECK_ARG(!cfg.workers || *cfg.workers == src.workers(), "--workers ", *cfg.workers,
                     " does not match the ", src.workers(), " workers of ", source_name(cfg),
                     "; expected ", src.workers(), " (or leave --workers out)");
    cfg.workers = src.workers();
  } else if (!cfg.workers) {
    cfg.workers = SimulateConfig::kDefaultWorkers;
  }
  if (src.iterations() > 0) {
    EXDYNA_CHECK_ARG(!cfg.iterations || *cfg.iterations <= src.iterations(), "--iterations ",
                     *cfg.iterations, " is more than the ", src.iterations(), " iterations of ",
                     source_name(cfg), "; expected 1..", src.iterations());
    if (!cfg.iterations) cfg.iterations = src.iterations();
  } else if (!cfg.iterations) {
    cfg.iterations = SimulateConfig::kDefaultIterations;
  }
  cfg.n_grad = src.n_g();
  // The run's sparsifier options, checked once before any worker starts.
  cfg.sparse = sparsifiers::bind(cfg.sparse, src.n_g(), *cfg.workers, 0);
  cfg.sparse.validate();
  return cfg;
}

}  // namespace exdyna::sim
