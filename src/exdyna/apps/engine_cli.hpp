// Engine options shared by every subcommand (--backend, --workers, --timeout, --all-ranks-output,
// --listen) and the one function that runs a per-rank body on whatever engine they select:
//   in process   one thread per rank over a LocalGroup (--backend local, or auto with 1 worker)
//   launch       auto/gloo with --workers N outside any launcher: start N processes of this
//                binary over Gloo on 127.0.0.1 and wait for them (each re-runs the same command)
//   mpi / gloo   this process is one rank of a job started by mpirun / torchrun / our launcher
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/comm/engines/factory.hpp"
#include "exdyna/comm/fingerprint.hpp"

namespace exdyna::apps {

struct EngineCli {
  std::string backend = "auto";
  int workers = 1;
  double timeout_s = 300;
  bool all_ranks_output = false;
  std::string listen;  // Gloo listen address (multi-machine)
  // Set by add_engine_options: lets run_on_engine tell a --workers the user gave (checked against
  // an mpirun/torchrun world size) from the default (ignored under a launcher).
  const CLI::Option* workers_option = nullptr;

  std::chrono::milliseconds timeout() const;
};

// Registers --backend (default `default_backend`), --timeout, --all-ranks-output, --listen and,
// when add_workers, --workers.
void add_engine_options(CLI::App* sub, EngineCli& e, bool add_workers = true,
                        const std::string& default_backend = "auto");

// Runs body(comm) once per rank on the selected engine: comm::run_on_engine (runner.hpp).
int run_on_engine(const EngineCli& e, const std::function<void(comm::Communicator&)>& body);

// The fields every command's startup fingerprint starts with: exdyna version and engine.
comm::Fingerprint base_fingerprint(const comm::Communicator& c);

}  // namespace exdyna::apps
