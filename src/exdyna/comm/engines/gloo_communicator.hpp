// The Gloo engine: the Communicator over libtorch's c10d::ProcessGroupGloo, one process per rank,
// rendezvous through c10d's TCPStore configured the way torchrun configures PyTorch (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK).
//
// All-reduces and all-gathers smaller than the algorithm switch (measured at start-up, or set)
// run on the group's Gloo context with log2 W rounds (bcube all-reduce, Bruck all-gather), on both
// paths below; larger ones take the ring as listed (gloo_algorithms.hpp).
//
// ProcessGroupGloo provides the rendezvous, the full mesh of connections and the Gloo context; the
// collectives run through ProcessGroupGloo (default: the engine is the process-group communicator,
// process_group_communicator.hpp, over that group) or run the same Gloo algorithms directly on
// that context (via_c10d = false):
//   all-reduce            ProcessGroupGloo::allreduce (SUM), in place   (direct: gloo::allreduce)
//   padded all-gather     ProcessGroupGloo::allgather of equal-size tensors of max(counts)
//                         elements: the padding really travels           (direct: gloo::allgather)
//   exact all-gather      gloo::allgatherv with each rank's true byte count on the group's
//                         context, on both paths: c10d's allgather insists on equal sizes, so
//                         it cannot send uneven lists without padding
//   broadcast, barrier    ProcessGroupGloo::broadcast / barrier  (direct: gloo::broadcast /
//   barrier)
//
// Every call waits with the communicator's timeout; the process group's own Gloo timeout is the
// same, so a dead or stalled peer ends the call with an error naming the operation. After a
// failure, the surviving ranks post a note to the rendezvous store and, for a moment, look for
// the others' notes, so the message can name the ranks that never reported (dead or stalled).
//
// This header is libtorch-free so the factory and the apps do not need torch's include path.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

struct GlooConfig {
  std::string master_addr = "127.0.0.1";  // where rank 0's TCPStore listens
  int master_port = 29500;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // Address this rank's Gloo transport listens on. Empty: 127.0.0.1 when master_addr is a loopback
  // address (one machine), else this machine's hostname as it resolves (several machines).
  std::string listen_addr;
  std::chrono::milliseconds timeout{300'000};
  // true (default): collectives go through ProcessGroupGloo's public API (work queue, worker
  // thread). false (EXDYNA_GLOO_PATH=direct): the same Gloo algorithms run on the process group's
  // context on the calling thread, saving two thread hand-offs per call. Results are identical
  // either way; on a 2-core machine the difference drowns in scheduling noise.
  bool via_c10d = true;
  // Below which result size an all-reduce or all-gather takes log2 W rounds instead of the ring
  // (Communicator::AlgorithmSwitch; EXDYNA_GLOO_LOG_BELOW, gloo_algorithm_switch.hpp). Empty
  // (default, "auto"): measured on the job's links when the communicator starts.
  std::optional<Communicator::AlgorithmSwitch> algorithm_switch;
  // The job's shared secret (EXDYNA_JOB_TOKEN); proved through the store before the mesh is built.
  // Empty on every rank: the store stays open to anyone (rank 0 warns).
  std::string job_token;

  // Reads MASTER_ADDR (default 127.0.0.1), MASTER_PORT (default 29500), RANK, WORLD_SIZE (both
  // required), LOCAL_RANK (default 0), EXDYNA_LISTEN_ADDR, EXDYNA_GLOO_PATH (direct | c10d),
  // EXDYNA_GLOO_LOG_BELOW (auto | ring | SIZE | SIZE,SIZE) and EXDYNA_JOB_TOKEN;
  // throws InvalidArgument naming a missing or malformed variable.
  static GlooConfig from_env();
  void validate() const;
};

std::unique_ptr<Communicator> make_gloo_communicator(const GlooConfig& cfg);

}  // namespace exdyna::comm
