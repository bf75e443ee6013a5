// `exdyna simulate` on the real engines: each process (or thread, for --backend local) is one
// worker computing its own gradients from the same source (its own slice of a trace); rank 0
// writes the outputs. The in-process default path stays sim::simulate.
#pragma once

#include <ostream>

#include "exdyna/apps/engine_cli.hpp"
#include "exdyna/sim/simulate.hpp"

namespace exdyna::apps {

// cfg as the command parsed it (workers unset unless --workers was given). Under mpirun or
// torchrun the world size is the launcher's; with a local launch, the resolved worker count.
// Checks the ranks' configurations agree (fingerprint) before the first step. Returns the exit
// code.
int simulate_on_engine(const sim::SimulateConfig& cfg, EngineCli engine, std::ostream& os);

}  // namespace exdyna::apps
