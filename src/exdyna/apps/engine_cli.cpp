#include "exdyna/apps/engine_cli.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "exdyna/comm/engines/launcher.hpp"
#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::apps {

std::chrono::milliseconds EngineCli::timeout() const {
  EXDYNA_CHECK_ARG(std::isfinite(timeout_s) && timeout_s > 0 && timeout_s <= 86400, "--timeout ",
                   timeout_s, " is not valid; expected seconds in (0, 86400]");
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(timeout_s * 1000)));
}

void add_engine_options(CLI::App* sub, EngineCli& e, bool add_workers,
                        const std::string& default_backend) {
  e.backend = default_backend;
  sub->add_option("--backend", e.backend,
                  "communication engine: auto (mpi under mpirun, gloo under torchrun, else launch "
                  "--workers processes), mpi, gloo, local (in-process threads)")
      ->check(CLI::IsMember({"auto", "mpi", "gloo", "local"}))
      ->capture_default_str();
  if (add_workers)
    sub->add_option("--workers", e.workers, "number of workers (ranks)")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
  sub->add_option("--timeout", e.timeout_s, "seconds every collective may block before failing")
      ->capture_default_str();
  sub->add_flag("--all-ranks-output", e.all_ranks_output,
                "local launch: show every rank's standard output (default: rank 0 only)");
  sub->add_option(
      "--listen", e.listen,
      "gloo: address this rank listens on (default: 127.0.0.1 when MASTER_ADDR is loopback, "
      "else EXDYNA_LISTEN_ADDR or the host name)");
}

comm::Fingerprint base_fingerprint(const comm::Communicator& c) {
  comm::Fingerprint fp;
  fp.add("exdyna_version", EXDYNA_VERSION);
  fp.add("engine", std::string(c.engine()));
  fp.add("world_size", std::to_string(c.size()));
  return fp;
}

int run_on_engine(const EngineCli& e, const std::function<void(comm::Communicator&)>& body) {
  const auto timeout = e.timeout();
  const auto plan = comm::plan_engine(comm::parse_backend(e.backend), e.workers);
  switch (plan) {
    case comm::Plan::kInProcess:
      comm::run_local(e.workers, body, timeout);
      return 0;
    case comm::Plan::kLaunch: {
      comm::LaunchOptions lo;
      lo.workers = e.workers;
      lo.argv = comm::self_argv();
      lo.all_ranks_output = e.all_ranks_output;
      lo.timeout = timeout;
      return comm::launch_local(lo);
    }
    case comm::Plan::kConnectMpi:
    case comm::Plan::kConnectGloo:
      break;
  }
  int rank = -1;
  try {
    comm::EngineOptions eo;
    eo.timeout = timeout;
    eo.listen_addr = e.listen;
    auto c = comm::make_communicator(plan, eo);
    rank = c->rank();
    body(*c);
    c.reset();  // orderly shutdown only after success
    return 0;
  } catch (const std::exception& ex) {
    std::fflush(stdout);
    if (rank >= 0)
      std::fprintf(stderr, "exdyna: error: rank %d (%s): %s\n", rank, comm::to_string(plan),
                   ex.what());
    else
      std::fprintf(stderr, "exdyna: error: %s: %s\n", comm::to_string(plan), ex.what());
    std::fflush(stderr);
    std::_Exit(2);
  }
}

}  // namespace exdyna::apps
