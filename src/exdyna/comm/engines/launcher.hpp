// The local launcher: starts N worker processes of this same binary on one machine, wired the way
// torchrun wires PyTorch (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
// MASTER_PORT=<a free port>), so each worker's `auto` backend resolves to Gloo over loopback.
//
// Output: every line a worker prints is prefixed with "[rank R] ". Standard output is shown for
// rank 0 only unless all_ranks_output; standard error is shown for every rank (errors from any
// rank matter). When a worker fails (non-zero exit or a signal), the others get up to
// timeout + grace to fail on their own (their collectives time out or see the peer gone), then are
// terminated; the launcher reports which rank failed first and returns a non-zero code.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace exdyna::comm {

struct LaunchOptions {
  int workers = 2;
  std::vector<std::string> argv;       // argv of each worker (argv[0] included)
  std::string exe = "/proc/self/exe";  // the binary to start
  bool all_ranks_output = false;
  std::chrono::milliseconds timeout{300'000};  // the workers' collective timeout
  std::chrono::milliseconds grace{3'000};      // extra wait before terminating survivors
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free port on master_addr
  // The secret every worker proves at start-up (comm/job_token.hpp). Empty: EXDYNA_JOB_TOKEN from
  // this process's environment, else a fresh random one, so a local job is closed by default.
  std::string job_token;
};

// Runs the workers to completion. Returns 0 when every worker exited 0, else the first failing
// worker's exit code (128 + signal for a signal), never 0.
int launch_local(const LaunchOptions& opt);

// This process's argv as the kernel saw it (/proc/self/cmdline).
std::vector<std::string> self_argv();

// A TCP port nobody listens on right now, on addr.
int free_port(const std::string& addr = "127.0.0.1");

}  // namespace exdyna::comm
