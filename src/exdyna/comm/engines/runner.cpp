#include "exdyna/comm/engines/runner.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "exdyna/comm/engines/launcher.hpp"
#include "exdyna/comm/local_group.hpp"

namespace exdyna::comm {

int run_on_engine(const RunOptions& opt, const std::function<void(Communicator&)>& body) {
  EXDYNA_CHECK_ARG(opt.timeout.count() > 0, "timeout ", opt.timeout.count(),
                   " ms is not valid; expected > 0");
  const auto plan = plan_engine(opt.backend, opt.workers);
  switch (plan) {
    case Plan::kInProcess:
      run_local(opt.workers, body, opt.timeout);
      return 0;
    case Plan::kLaunch: {
      LaunchOptions lo;
      lo.workers = opt.workers;
      lo.argv = self_argv();
      lo.all_ranks_output = opt.all_ranks_output;
      lo.timeout = opt.timeout;
      return launch_local(lo);
    }
    case Plan::kConnectMpi:
    case Plan::kConnectGloo:
      break;
  }
  int rank = -1;
  // Outlives the catch: a failed engine is never shut down in order (see the header).
  std::unique_ptr<Communicator> c;
  try {
    EngineOptions eo;
    eo.timeout = opt.timeout;
    eo.listen_addr = opt.listen_addr;
    c = make_communicator(plan, eo);
    rank = c->rank();
    body(*c);
    c.reset();  // orderly shutdown only after success
    return 0;
  } catch (const std::exception& ex) {
    std::fflush(stdout);
    if (rank >= 0)
      std::fprintf(stderr, "exdyna: error: rank %d (%s): %s\n", rank, to_string(plan), ex.what());
    else
      std::fprintf(stderr, "exdyna: error: %s\n", ex.what());
    std::fflush(stderr);
    std::_Exit(2);
  }
}

}  // namespace exdyna::comm
