#include "exdyna/apps/engine_cli.hpp"
#include "exdyna/apps/cli_checks.hpp"

#include <cmath>

#include "exdyna/comm/engines/runner.hpp"
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
    e.workers_option = sub->add_option("--workers", e.workers, "number of workers (ranks)")
                           ->check(int_between(1, 4096))
                           ->capture_default_str();
  sub->add_option("--timeout", e.timeout_s, "seconds every collective may block before failing")
      ->check(positive_number())
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
  comm::RunOptions o;
  o.backend = comm::parse_backend(e.backend);
  o.workers = e.workers;
  // Under mpirun or torchrun the world size is the launcher's; only a --workers the user typed is
  // held against it.
  const bool launched = comm::in_launched_environment();
  if (launched && e.workers_option && e.workers_option->count() == 0) o.workers = 1;
  o.timeout = e.timeout();
  o.all_ranks_output = e.all_ranks_output;
  o.listen_addr = e.listen;
  return comm::run_on_engine(o, body);
}

}  // namespace exdyna::apps
