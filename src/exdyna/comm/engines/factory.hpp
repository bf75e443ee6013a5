// Picks and builds the communication engine for this process. The only place that knows which
// engines were compiled in (backend #if conditionals live in factory.cpp and nowhere else).
//
// `auto` resolves from the environment: MPI under mpirun (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
// PMIX_RANK), Gloo when torchrun-style variables are set (RANK and WORLD_SIZE), else a local
// launch: the caller starts its workers itself (launcher.hpp) or, for one worker, runs in process.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

enum class Backend { kAuto, kMpi, kGloo, kLocal };
const char* to_string(Backend b);
Backend parse_backend(std::string_view s);  // auto | mpi | gloo | local

// Which engines this build has.
bool have_mpi();
bool have_gloo();

// This process was started by mpirun (or another PMI launcher).
bool in_mpi_environment();
// torchrun-style variables (RANK and WORLD_SIZE) are set, e.g. by torchrun or by our launcher.
bool in_torchrun_environment();
// Either: this process is one rank of a job a launcher (mpirun, torchrun, our own) started, so
// the world size is the launcher's and no process of ours starts others. The one test commands use.
bool in_launched_environment();

// What a process with the requested backend and `workers` should do.
enum class Plan {
  kConnectMpi,   // build the MPI engine; this process is one rank
  kConnectGloo,  // build the Gloo engine; this process is one rank (rank/size from the env)
  kLaunch,       // start `workers` processes of this binary over Gloo on 127.0.0.1 (launcher.hpp)
  kInProcess,    // in-process group: one thread per rank (LocalGroup / run_local)
};
const char* to_string(Plan p);
// Throws InvalidArgument when the request cannot be met (mpi outside mpirun with workers > 1, an
// engine this build lacks, --workers disagreeing with the launcher's world size).
Plan plan_engine(Backend requested, int workers);

struct EngineOptions {
  std::chrono::milliseconds timeout{300'000};
  // Gloo: address this rank listens on; empty: loopback when MASTER_ADDR is loopback.
  std::string listen_addr;
};

// Builds the engine for kConnectMpi or kConnectGloo (rank and size from the environment).
std::unique_ptr<Communicator> make_communicator(Plan plan, const EngineOptions& opt);

}  // namespace exdyna::comm
