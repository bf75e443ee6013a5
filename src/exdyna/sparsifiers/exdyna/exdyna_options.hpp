// Options of the ExDyna algorithm (paper Algorithms 1-5). The paper-mode defaults are the authors'
// choices listed in docs/controller.md ("Where the paper is silent"). Validated at construction of
// the sparsifier; set from text through the option table (sparsifiers/option_table.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace exdyna::sparsifiers {

// How the next threshold is chosen.
enum class Controller {
  kPaper,      // Alg. 5: multiply by 1 + gamma, 1 + gamma/4 or 1 - gamma
  kHistogram,  // ladder of counts gathered with k_i, interpolate the threshold giving k
  kExact,      // the histogram's ladder, and this iteration's selection cut to exactly k
               // from it (ladder_cut.hpp)
};
// How partitions are re-balanced between iterations.
enum class Balance {
  kPaper,  // Alg. 3: move blk_move blocks between unbalanced neighbours
  kExact,  // equal shares of the previous iteration's selections per partition
};
// The exact controller under a worker cap: whether the counts, ladders and indices travel in one
// all-gather (fused_gather.hpp) instead of two.
enum class Fuse {
  kAuto,  // whichever the engine's measured latency and bandwidth say costs less, step by step
  kOn,    // fused wherever the step allows it
  kOff,   // always the count all-gather, then the index all-gather
};
const char* to_string(Controller c);
const char* to_string(Balance b);
const char* to_string(Fuse f);
Controller parse_controller(std::string_view s);
Balance parse_balance(std::string_view s);
Fuse parse_fuse(std::string_view s);
// "auto" (the Poisson floor), "none" or "0", or a factor >= 1 (checked by validate()).
double parse_worker_cap(std::string_view s);
std::string worker_cap_text(double cap);

struct ExDynaOptions {
  std::int64_t n_blocks = 1024;  // n_b
  double min_blk = -1;           // < 0: n_b / (4 n) as a real number
  std::int64_t blk_move = 1;
  double alpha = 1.05;            // Alg. 3 imbalance band
  double beta = 1.1;              // Alg. 5 density band
  double gamma = 0.005;           // Alg. 5 step
  double initial_threshold = -1;  // < 0: 1 / (2 sqrt(k))
  // The exact controller and balance by default: every iteration selects exactly k. kPaper and
  // kPaper give the paper's Algorithms 3 and 5.
  Controller controller = Controller::kExact;
  Balance balance = Balance::kExact;
  // histogram controller: rungs of the ladder; 129 over 16x either way is 16 per octave (4.4%
  // apart): 4 per octave could not resolve the pile-up of residuals just under the threshold
  // at d = 0.001 (docs/controller.md)
  int ladder_rungs = 129;
  double ladder_span = 16;  // histogram controller: ladder spans [thr/span, thr*span]
  // exact controller: no worker sends more than worker_cap * k / n values (0: no cap; kAutoCap:
  // the Poisson floor 1 + sqrt(2 ln n / (k / n)); kDefaultCap: kAutoCap with the exact controller,
  // else no cap); the padded all-gather's f(t) is then at most the cap (ladder_cut.hpp,
  // max_per_worker())
  double worker_cap = kDefaultCap;
  // exact controller under a worker cap: one all-gather for counts and indices (Fuse)
  Fuse fuse = Fuse::kAuto;
  static constexpr double kAutoCap = -1;
  static constexpr double kDefaultCap = -2;

  // worker_cap with kDefaultCap resolved: kAutoCap, a factor, or 0.
  double effective_worker_cap() const;

  // Throws InvalidArgument naming the option, its value and the allowed range.
  void validate(int world_size) const;
  // The most values one worker may send for k over n workers: max(ceil(k / n), floor(cap k / n))
  // with cap = the effective worker cap (or the Poisson floor for kAutoCap); 0 when there is none.
  std::int64_t max_per_worker(std::int64_t k, int world_size) const;
};

}  // namespace exdyna::sparsifiers
