#include "exdyna/core/exdyna_options.hpp"

#include <cmath>
#include <sstream>

#include "exdyna/core/error.hpp"

namespace exdyna::core {

const char* to_string(Controller c) {
  switch (c) {
    case Controller::kPaper:
      return "paper";
    case Controller::kHistogram:
      return "histogram";
    case Controller::kExact:
      return "exact";
  }
  return "?";
}
const char* to_string(Balance b) {
  return b == Balance::kPaper ? "paper" : "exact";
}

Controller parse_controller(std::string_view s) {
  if (s == "paper") return Controller::kPaper;
  if (s == "histogram") return Controller::kHistogram;
  if (s == "exact") return Controller::kExact;
  throw InvalidArgument(detail::concat("controller '", s,
                                       "' is not valid; expected 'paper', 'histogram' or 'exact'"));
}

Balance parse_balance(std::string_view s) {
  if (s == "paper") return Balance::kPaper;
  if (s == "exact") return Balance::kExact;
  throw InvalidArgument(
      detail::concat("balance '", s, "' is not valid; expected 'paper' or 'exact'"));
}

void ExDynaOptions::validate(int world_size) const {
  EXDYNA_CHECK_ARG(n_blocks >= world_size, "n_b (blocks) ", n_blocks,
                   " is smaller than the number of workers ", world_size,
                   "; expected n_b >= workers");
  EXDYNA_CHECK_ARG(blk_move >= 1, "blk_move ", blk_move, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(min_blk < 0 || (std::isfinite(min_blk) && min_blk >= 1), "min_blk ", min_blk,
                   " is not valid; expected >= 1 (or < 0 for the default n_b / (4 n))");
  EXDYNA_CHECK_ARG(std::isfinite(alpha) && alpha > 1, "alpha ", alpha,
                   " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(std::isfinite(beta) && beta > 1, "beta ", beta, " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(std::isfinite(gamma) && gamma > 0 && gamma < 1, "gamma ", gamma,
                   " is not valid; expected a value in (0, 1)");
  EXDYNA_CHECK_ARG(
      initial_threshold < 0 || (std::isfinite(initial_threshold) && initial_threshold > 0),
      "initial threshold ", initial_threshold,
      " is not valid; expected a finite value > 0 (or < 0 for the default 1 / (2 sqrt(k)))");
  EXDYNA_CHECK_ARG(ladder_rungs >= 3 && ladder_rungs <= 257, "ladder rungs ", ladder_rungs,
                   " is not valid; expected 3..257");
  EXDYNA_CHECK_ARG(std::isfinite(ladder_span) && ladder_span > 1, "ladder span ", ladder_span,
                   " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(worker_cap == 0 || (std::isfinite(worker_cap) && worker_cap >= 1), "worker cap ",
                   worker_cap, " is not valid; expected 0 (none) or >= 1");
  EXDYNA_CHECK_ARG(worker_cap == 0 || controller == Controller::kExact, "worker cap ", worker_cap,
                   " needs the exact controller (it cuts each worker's count from the gathered "
                   "ladders); the controller is '",
                   to_string(controller), "'");
}

std::string ExDynaOptions::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "exdyna.n_b=" << n_blocks << ";min_blk=" << min_blk << ";blk_move=" << blk_move
     << ";alpha=" << alpha << ";beta=" << beta << ";gamma=" << gamma
     << ";initial_threshold=" << initial_threshold << ";controller=" << to_string(controller)
     << ";balance=" << to_string(balance) << ";ladder_rungs=" << ladder_rungs
     << ";ladder_span=" << ladder_span << ";worker_cap=" << worker_cap;
  return os.str();
}

}  // namespace exdyna::core
