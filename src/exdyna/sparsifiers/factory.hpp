// Building an error-feedback sparsifier: the one function simulate's workers, the trainer, the
// Python hook and a C++ program call. It binds what only the run knows (the gradient length
// n_g, the world size, this worker's rank) to the options the user chose; the registry refuses an
// unknown name (listing the known ones) and the sparsifier validates the bound options, once.
#pragma once

#include <cstdint>
#include <string>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/registry.hpp"

namespace exdyna::sparsifiers {

// options with n_g, world_size and rank set; does not validate.
SparsifierConfig bind(SparsifierConfig options, std::int64_t n_g, int world_size, int rank);

// Refuses what make_error_feedback would refuse, without building anything: an unknown name, or
// options that are not valid once bound. For a run's check before its workers start.
void check_sparsifier(const Registry& registry, const std::string& name,
                      const SparsifierConfig& bound);

// The sparsifier `name` from `registry`, on the bound options, wrapped in error feedback.
// Throws InvalidArgument for an unknown name (listing the known ones) or invalid options (naming
// the option, its value and what was expected).
// ef_options with the convergence mechanisms of the bound options: what make_error_feedback
// passes to ErrorFeedback, and what the device error feedback takes (the warm-up's phases are
// built from `registry` under `name`).
ErrorFeedbackOptions with_convergence(ErrorFeedbackOptions ef_options, const std::string& name,
                                      const SparsifierConfig& bound, const Registry& registry);

ErrorFeedback make_error_feedback(const std::string& name, const SparsifierConfig& options,
                                  std::int64_t n_g, int world_size, int rank,
                                  const Registry& registry, ErrorFeedbackOptions ef_options = {});

}  // namespace exdyna::sparsifiers
