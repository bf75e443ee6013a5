// The Gloo engine: the Communicator over libtorch's c10d::ProcessGroupGloo, one process per rank,
// rendezvous through c10d's TCPStore configured the way torchrun configures PyTorch (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK).
//
//   all-reduce            ProcessGroupGloo::allreduce (SUM), in place on the caller's buffer
//   padded all-gather     ProcessGroupGloo::allgather of equal-size tensors of max(counts) elements
//   exact all-gather      gloo::allgatherv on the process group's own Gloo context, with each
//                         rank's true byte count: no padding on the wire (c10d's allgather
//                         requires equal sizes, so it cannot express this)
//   broadcast, barrier    ProcessGroupGloo::broadcast / barrier
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

  // Reads MASTER_ADDR (default 127.0.0.1), MASTER_PORT (default 29500), RANK, WORLD_SIZE (both
  // required), LOCAL_RANK (default 0) and EXDYNA_LISTEN_ADDR; throws InvalidArgument naming a
  // missing or malformed variable.
  static GlooConfig from_env();
  void validate() const;
};

std::unique_ptr<Communicator> make_gloo_communicator(const GlooConfig& cfg);

}  // namespace exdyna::comm
