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
  return ErrorFeedback(registry.make(name, bind(options, n_g, world_size, rank)), n_g, ef_options);
}

}  // namespace exdyna::sparsifiers
