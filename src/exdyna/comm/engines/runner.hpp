// Runs a per-rank body on whatever engine a (backend, workers) request selects:
//   in process   one thread per rank over a LocalGroup (--backend local, or auto with 1 worker)
//   launch       auto/gloo with N workers outside any launcher: start N processes of this binary
//                over Gloo on 127.0.0.1 (launcher.hpp); each re-runs the same command line
//   mpi / gloo   this process is one rank of a job started by mpirun / torchrun / our launcher
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/comm/engines/factory.hpp"

namespace exdyna::comm {

struct RunOptions {
  Backend backend = Backend::kAuto;
  int workers = 1;
  std::chrono::milliseconds timeout{300'000};
  bool all_ranks_output = false;  // local launch: every rank's stdout, not only rank 0's
  std::string listen_addr;        // gloo: address to listen on
};

// Returns the process exit code: 0, or the launcher's code when it started workers. In a
// multi-process worker an exception is reported on stderr with the rank, and the process exits at
// once with code 2: no orderly MPI_Finalize or Gloo shutdown, which could block on peers still
// inside a collective; exiting closes our connections, so those peers fail fast. In process, the
// first rank's exception is rethrown (the group is aborted first, so no thread hangs).
int run_on_engine(const RunOptions& opt, const std::function<void(Communicator&)>& body);

}  // namespace exdyna::comm
