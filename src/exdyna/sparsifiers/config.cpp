#include "exdyna/sparsifiers/config.hpp"

#include <cmath>
#include <sstream>

#include "exdyna/sparsifiers/option_table.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

std::int64_t SparsifierConfig::k() const {
  return static_cast<std::int64_t>(std::floor(density * static_cast<double>(n_g)));
}

void SparsifierConfig::validate() const {
  EXDYNA_CHECK_ARG(std::isfinite(density) && density > 0 && density <= 1, "--density ", density,
                   " is not valid; expected a value in (0, 1]");
  EXDYNA_CHECK_ARG(n_g > 0, "n_g (--n-grad) ", n_g,
                   " is not valid; expected a gradient length > 0");
  EXDYNA_CHECK_ARG(static_cast<std::uint64_t>(n_g) < (std::uint64_t{1} << 32), "n_g (--n-grad) ",
                   n_g,
                   " is not supported; indices travel as 32-bit integers, expected n_g < 2^32");
  EXDYNA_CHECK_ARG(world_size >= 1, "world size ", world_size, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(rank >= 0 && rank < world_size, "rank ", rank, " outside [0, ", world_size, ")");
  EXDYNA_CHECK_ARG(n_g >= world_size, "n_g (--n-grad) ", n_g,
                   " is smaller than the number of workers ", world_size,
                   " (--workers); expected n_g >= workers");
  EXDYNA_CHECK_ARG(k() >= 1, "--density ", density, " selects floor(d * n_g) = ", k(),
                   " of n_g = ", n_g, " gradients; expected d * n_g >= 1");
  EXDYNA_CHECK_ARG(hard_threshold < 0 || std::isfinite(hard_threshold), "--hard-threshold ",
                   hard_threshold,
                   " is not valid; expected a finite value >= 0 (or < 0 for the default)");
  EXDYNA_CHECK_ARG(sidco.stages >= 1 && sidco.stages <= 10, "--sidco-stages ", sidco.stages,
                   " is not valid; expected 1..10");
  EXDYNA_CHECK_ARG(std::isfinite(dgc.sample) && dgc.sample > 0 && dgc.sample <= 1, "--dgc-sample ",
                   dgc.sample, " is not valid; expected a fraction in (0, 1]");
  EXDYNA_CHECK_ARG(oktopk.period >= 1, "--oktopk-period ", oktopk.period,
                   " is not valid; expected an iteration count >= 1");
  EXDYNA_CHECK_ARG(oktopk.repartition >= 1, "--oktopk-repartition ", oktopk.repartition,
                   " is not valid; expected an iteration count >= 1");
  const auto& c = convergence;
  EXDYNA_CHECK_ARG(c.momentum_correction >= 0 && c.momentum_correction < 1,
                   "--momentum-correction ", c.momentum_correction,
                   " is not valid; expected a momentum in [0, 1) (0: off)");
  EXDYNA_CHECK_ARG(std::isfinite(c.local_clip) && c.local_clip >= 0, "--local-clip ", c.local_clip,
                   " is not valid; expected a finite norm >= 0 (0: off)");
  EXDYNA_CHECK_ARG(std::isfinite(c.step_clip) && c.step_clip >= 0, "--step-clip ", c.step_clip,
                   " is not valid; expected a finite norm >= 0 (0: off)");
  EXDYNA_CHECK_ARG(c.warmup_steps >= 0, "--warmup-steps ", c.warmup_steps,
                   " is not valid; expected a step count >= 0 (0: off)");
  EXDYNA_CHECK_ARG(c.warmup_steps == 0 || (c.warmup_start > density && c.warmup_start <= 1),
                   "--warmup-start ", c.warmup_start, " is not valid with --density ", density,
                   "; expected a density in (d, 1] to warm up from");
  exdyna.validate(world_size);
}

// Every option of the table by its Python keyword, after what binds the configuration to a run.
std::string SparsifierConfig::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "density=" << density << ";n_g=" << n_g << ";world_size=" << world_size;
  for (const auto& o : option_table()) os << ";" << o.key << "=" << o.get(*this);
  return os.str();
}

}  // namespace exdyna::sparsifiers
