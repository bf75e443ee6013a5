#include "exdyna/sparsifiers/factory.hpp"

namespace exdyna::sparsifiers {

SparsifierConfig bind(SparsifierConfig options, std::int64_t n_g, int world_size, int rank) {
  options.n_g = n_g;
  options.world_size = world_size;
  options.rank = rank;
  return options;
}

void check_sparsifier(const Registry& registry, const std::string& name,
                      const SparsifierConfig& bound) {
  registry.require(name);
  bound.validate();
}

ErrorFeedback make_error_feedback(const std::string& name, const SparsifierConfig& options,
                                  std::int64_t n_g, int world_size, int rank,
                                  const Registry& registry, ErrorFeedbackOptions ef_options) {
  // Registry::make refuses an unknown name; the sparsifier's constructor validates the options.
  const SparsifierConfig bound = bind(options, n_g, world_size, rank);
  return ErrorFeedback(registry.make(name, bound), n_g,
                       with_convergence(std::move(ef_options), name, bound, registry));
}

ErrorFeedbackOptions with_convergence(ErrorFeedbackOptions ef_options, const std::string& name,
                                      const SparsifierConfig& bound, const Registry& registry) {
  ef_options.convergence = bound.convergence;
  ef_options.density = bound.density;
  if (bound.convergence.warmup_steps > 0) {
    // A warm-up phase at density 1 is the dense all-reduce, whatever the sparsifier.
    ef_options.remake = [registry, name, bound](double density) {
      SparsifierConfig c = bound;
      c.density = density;
      c.convergence = {};
      return registry.make(density >= 1 ? "dense" : name, c);
    };
  }
  return ef_options;
}

}  // namespace exdyna::sparsifiers
