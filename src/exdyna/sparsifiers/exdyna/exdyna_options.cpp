#include "exdyna/sparsifiers/exdyna/exdyna_options.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "exdyna/core/enum_names.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers {

namespace {
constexpr core::EnumNames<Controller, 3> kControllerNames{{{Controller::kPaper, "paper"},
                                                           {Controller::kHistogram, "histogram"},
                                                           {Controller::kExact, "exact"}}};
constexpr core::EnumNames<Balance, 2> kBalanceNames{
    {{Balance::kPaper, "paper"}, {Balance::kExact, "exact"}}};
constexpr core::EnumNames<Fuse, 3> kFuseNames{
    {{Fuse::kAuto, "auto"}, {Fuse::kOn, "on"}, {Fuse::kOff, "off"}}};
}  // namespace

const char* to_string(Controller c) {
  return core::enum_to_string(kControllerNames, c);
}
const char* to_string(Balance b) {
  return core::enum_to_string(kBalanceNames, b);
}

const char* to_string(Fuse f) {
  return core::enum_to_string(kFuseNames, f);
}

Controller parse_controller(std::string_view s) {
  return core::enum_parse(kControllerNames, "controller", s);
}

Balance parse_balance(std::string_view s) {
  return core::enum_parse(kBalanceNames, "balance", s);
}

Fuse parse_fuse(std::string_view s) {
  return core::enum_parse(kFuseNames, "fuse", s);
}

void ExDynaOptions::validate(int world_size) const {
  EXDYNA_CHECK_ARG(n_blocks >= world_size, "--blocks (n_b) ", n_blocks,
                   " is smaller than the number of workers ", world_size,
                   " (--workers); expected --blocks >= workers");
  EXDYNA_CHECK_ARG(blk_move >= 1, "blk_move ", blk_move, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(min_blk < 0 || (std::isfinite(min_blk) && min_blk >= 1), "--min-blk ", min_blk,
                   " is not valid; expected >= 1 (or < 0 for the default n_b / (4 n))");
  EXDYNA_CHECK_ARG(std::isfinite(alpha) && alpha > 1, "alpha ", alpha,
                   " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(std::isfinite(beta) && beta > 1, "beta ", beta, " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(std::isfinite(gamma) && gamma > 0 && gamma < 1, "gamma ", gamma,
                   " is not valid; expected a value in (0, 1)");
  EXDYNA_CHECK_ARG(
      initial_threshold < 0 || (std::isfinite(initial_threshold) && initial_threshold > 0),
      "--initial-threshold ", initial_threshold,
      " is not valid; expected a finite value > 0 (or < 0 for the default 1 / (2 sqrt(k)))");
  EXDYNA_CHECK_ARG(ladder_rungs >= 3 && ladder_rungs <= 257, "ladder rungs ", ladder_rungs,
                   " is not valid; expected 3..257");
  EXDYNA_CHECK_ARG(std::isfinite(ladder_span) && ladder_span > 1, "ladder span ", ladder_span,
                   " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(worker_cap == 0 || worker_cap == kAutoCap || worker_cap == kDefaultCap ||
                       (std::isfinite(worker_cap) && worker_cap >= 1),
                   "--worker-cap ", worker_cap, " is not valid; expected 0 (none), auto (",
                   kAutoCap, "), the default (", kDefaultCap, ") or >= 1");
  EXDYNA_CHECK_ARG(effective_worker_cap() == 0 || controller == Controller::kExact, "--worker-cap ",
                   worker_cap_text(worker_cap),
                   " needs --controller exact (it cuts each worker's count from the gathered "
                   "ladders); the controller is '",
                   to_string(controller), "'");
  EXDYNA_CHECK_ARG(fuse != Fuse::kOn || effective_worker_cap() != 0,
                   "--fuse on needs a worker cap (--controller exact and --worker-cap auto or a "
                   "factor): only a cap bounds what each worker sends before the plan; the worker "
                   "cap is '",
                   worker_cap_text(effective_worker_cap()), "'");
}

double ExDynaOptions::effective_worker_cap() const {
  if (worker_cap != kDefaultCap) return worker_cap;
  return controller == Controller::kExact ? kAutoCap : 0;
}

std::int64_t ExDynaOptions::max_per_worker(std::int64_t k, int world_size) const {
  const double cap = effective_worker_cap();
  // One worker sends all k: a cap bounds nothing there, and one at k would count as binding in
  // every step and steer the exact controller's reach (cap_pressure) for nothing.
  if (cap == 0 || world_size <= 1) return 0;
  const double share = static_cast<double>(k) / world_size;
  // The Poisson floor of f(t): the expected largest of n Poisson counts of mean k/n, over k/n.
  const double factor =
      cap == kAutoCap ? 1.0 + std::sqrt(2.0 * std::log(static_cast<double>(world_size)) / share)
                      : cap;
  // Rounded down, so that f(t) stays at most the factor, but never below an even share: the caps
  // together must hold k.
  const auto even = (k + world_size - 1) / world_size;
  return std::max<std::int64_t>(even, static_cast<std::int64_t>(std::floor(factor * share)));
}

double parse_worker_cap(std::string_view s) {
  if (s == "auto") return ExDynaOptions::kAutoCap;
  if (s == "none") return 0;
  double v = 0;
  const std::string text(s);
  std::size_t used = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  EXDYNA_CHECK_ARG(used == text.size() && used > 0 && (v == 0 || (std::isfinite(v) && v >= 1)),
                   "worker cap '", s, "' is not valid; expected auto, none, 0 or a factor >= 1");
  return v;
}

std::string worker_cap_text(double cap) {
  if (cap == ExDynaOptions::kAutoCap) return "auto";
  if (cap == ExDynaOptions::kDefaultCap) return "default";
  std::ostringstream os;
  os << cap;
  return os.str();
}

}  // namespace exdyna::sparsifiers
