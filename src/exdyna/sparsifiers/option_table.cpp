#include "exdyna/sparsifiers/option_table.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers {

namespace {

[[noreturn]] void refuse(std::string_view text, std::string_view expected) {
  throw InvalidArgument(detail::concat(text, " is not valid; expected ", expected));
}

// The whole of text as a base-10 integer in lo .. hi.
template <typename T>
T integer(std::string_view text, T lo, T hi, std::string_view expected) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    refuse(text, expected);
  return v;
}

// The whole of text as a finite number for which ok(v) holds.
double number(std::string_view text, bool (*ok)(double), std::string_view expected) {
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v) || !ok(v))
    refuse(text, expected);
  return v;
}

template <typename T>
std::string shown(T v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round trip
  return std::string(buf, end);
}

constexpr auto kMaxInt = std::numeric_limits<int>::max();
constexpr auto kMaxI64 = std::numeric_limits<std::int64_t>::max();
bool positive(double v) {
  return v > 0;
}
bool above_one(double v) {
  return v > 1;
}
bool fraction(double v) {
  return v > 0 && v <= 1;
}
bool unit_interval(double v) {
  return v >= 0 && v < 1;
}
bool non_negative(double v) {
  return v >= 0;
}
bool open_fraction(double v) {
  return v > 0 && v < 1;
}

using C = SparsifierConfig;
using V = std::string_view;

const OptionSpec kOptions[] = {
    {"gather", "--gather,--gather-mode", OptionKind::kChoice, "padded | exact", "",
     "index all-gather: padded (as the paper) or exact (allgatherv)", "",
     [](C& c, V t) { c.gather_mode = comm::parse_gather_mode(t); },
     [](const C& c) { return std::string(comm::to_string(c.gather_mode)); }},
    {"values", "--values", OptionKind::kChoice, "fp32 | fp16 | bf16", "",
     "format of the values sent: fp32, or fp16 / bf16 (2 bytes each; the rounding error stays in "
     "the residual)",
     "", [](C& c, V t) { c.values = core::parse_value_format(t); },
     [](const C& c) { return std::string(core::to_string(c.values)); }},
    {"blocks", "--blocks", OptionKind::kInteger, "an integer >= 1", "exdyna",
     "number of blocks n_b the gradient is cut into (at least the number of workers)", "",
     [](C& c, V t) { c.exdyna.n_blocks = integer<std::int64_t>(t, 1, kMaxI64, "an integer >= 1"); },
     [](const C& c) { return shown(c.exdyna.n_blocks); }},
    {"min_blk", "--min-blk", OptionKind::kNumber, "a finite number > 0", "exdyna",
     "fewest blocks a partition keeps (at least 1)",
     "1 (exact balance), n_b / (4 n) (paper balance)",
     [](C& c, V t) { c.exdyna.min_blk = number(t, positive, "a finite number > 0"); },
     [](const C& c) { return shown(c.exdyna.min_blk); }},
    {"blk_move", "--blk-move", OptionKind::kInteger, "an integer >= 1", "exdyna",
     "blocks moved between unbalanced neighbours per iteration (paper balance, Alg. 3)", "",
     [](C& c, V t) { c.exdyna.blk_move = integer<std::int64_t>(t, 1, kMaxI64, "an integer >= 1"); },
     [](const C& c) { return shown(c.exdyna.blk_move); }},
    {"alpha", "--alpha", OptionKind::kNumber, "a number > 1", "exdyna",
     "imbalance band of the paper balance (Alg. 3): neighbours further apart than alpha move "
     "blocks",
     "", [](C& c, V t) { c.exdyna.alpha = number(t, above_one, "a number > 1"); },
     [](const C& c) { return shown(c.exdyna.alpha); }},
    {"beta", "--beta", OptionKind::kNumber, "a number > 1", "exdyna",
     "density band of the paper controller (Alg. 5)", "",
     [](C& c, V t) { c.exdyna.beta = number(t, above_one, "a number > 1"); },
     [](const C& c) { return shown(c.exdyna.beta); }},
    {"gamma", "--gamma", OptionKind::kNumber, "a number in (0, 1)", "exdyna",
     "threshold step of the paper controller (Alg. 5)", "",
     [](C& c, V t) { c.exdyna.gamma = number(t, open_fraction, "a number in (0, 1)"); },
     [](const C& c) { return shown(c.exdyna.gamma); }},
    {"initial_threshold", "--initial-threshold", OptionKind::kNumber, "a finite number > 0",
     "exdyna", "first threshold", "1 / (2 sqrt(k))",
     [](C& c, V t) { c.exdyna.initial_threshold = number(t, positive, "a finite number > 0"); },
     [](const C& c) { return shown(c.exdyna.initial_threshold); }},
    {"controller", "--controller", OptionKind::kChoice, "paper | histogram | exact", "exdyna",
     "threshold controller: exact (every iteration selects exactly k), paper (Alg. 5) or "
     "histogram",
     "", [](C& c, V t) { c.exdyna.controller = parse_controller(t); },
     [](const C& c) { return std::string(to_string(c.exdyna.controller)); }},
    {"balance", "--balance", OptionKind::kChoice, "paper | exact", "exdyna",
     "partition balance: exact (equal shares of the last selections) or paper (Alg. 3)", "",
     [](C& c, V t) { c.exdyna.balance = parse_balance(t); },
     [](const C& c) { return std::string(to_string(c.exdyna.balance)); }},
    {"worker_cap", "--worker-cap", OptionKind::kCap, "auto | none | 0 | a factor >= 1", "exdyna",
     "exact controller: no worker sends more than CAP * k / n values; auto: the Poisson floor "
     "1 + sqrt(2 ln n / (k / n))",
     "auto with the exact controller, else none",
     [](C& c, V t) { c.exdyna.worker_cap = parse_worker_cap(t); },
     [](const C& c) { return worker_cap_text(c.exdyna.effective_worker_cap()); }},
    {"fuse", "--fuse", OptionKind::kChoice, "auto | on | off", "exdyna",
     "exact controller under a worker cap, on the CPU: counts and indices in one all-gather (on), "
     "in two "
     "(off), or whichever the measured latency and bandwidth favour, step by step (auto)",
     "", [](C& c, V t) { c.exdyna.fuse = parse_fuse(t); },
     [](const C& c) { return std::string(to_string(c.exdyna.fuse)); }},
    {"ladder_rungs", "--ladder-rungs", OptionKind::kInteger, "an integer in 3..257", "exdyna",
     "exact and histogram controllers: rungs of the ladder of counts gathered with k_i", "",
     [](C& c, V t) { c.exdyna.ladder_rungs = integer(t, 3, 257, "an integer in 3..257"); },
     [](const C& c) { return shown(c.exdyna.ladder_rungs); }},
    {"ladder_span", "--ladder-span", OptionKind::kNumber, "a number > 1", "exdyna",
     "exact and histogram controllers: the ladder spans [thr / span, thr * span]", "",
     [](C& c, V t) { c.exdyna.ladder_span = number(t, above_one, "a number > 1"); },
     [](const C& c) { return shown(c.exdyna.ladder_span); }},
    {"hard_threshold", "--hard-threshold", OptionKind::kNumber, "a finite number > 0",
     "hard-threshold", "the fixed threshold", "1 / (2 sqrt(k))",
     [](C& c, V t) { c.hard_threshold = number(t, positive, "a finite number > 0"); },
     [](const C& c) { return shown(c.hard_threshold); }},
    {"sidco_stages", "--sidco-stages", OptionKind::kInteger, "an integer in 1..10", "sidco",
     "stages of the multi-stage exponential fit", "",
     [](C& c, V t) { c.sidco.stages = integer(t, 1, 10, "an integer in 1..10"); },
     [](const C& c) { return shown(c.sidco.stages); }},
    {"randomk_seed", "--randomk-seed", OptionKind::kInteger, "an integer >= 0", "randomk",
     "seed of the indices every rank draws (with the iteration)", "",
     [](C& c, V t) {
       c.randomk.seed = integer<std::uint64_t>(t, 0, std::numeric_limits<std::uint64_t>::max(),
                                               "an integer >= 0");
     },
     [](const C& c) { return shown(c.randomk.seed); }},
    {"dgc_sample", "--dgc-sample", OptionKind::kNumber, "a number in (0, 1]", "dgc",
     "fraction of the gradient sampled for the threshold (at least 64 / d values)", "",
     [](C& c, V t) { c.dgc.sample = number(t, fraction, "a number in (0, 1]"); },
     [](const C& c) { return shown(c.dgc.sample); }},
    {"momentum_correction", "--momentum-correction", OptionKind::kNumber, "a number in [0, 1)", "",
     "DGC's momentum correction: accumulate the velocity m u + g instead of the gradient, "
     "masked where sent; the optimizer then must apply no momentum (0: off)",
     "",
     [](C& c, V t) {
       c.convergence.momentum_correction = number(t, unit_interval, "a number in [0, 1)");
     },
     [](const C& c) { return shown(c.convergence.momentum_correction); }},
    {"local_clip", "--local-clip", OptionKind::kNumber, "a finite number >= 0", "",
     "DGC's local gradient clipping: each of N workers clips its gradient's norm to this / "
     "sqrt(N) before accumulating (0: off)",
     "",
     [](C& c, V t) { c.convergence.local_clip = number(t, non_negative, "a finite number >= 0"); },
     [](const C& c) { return shown(c.convergence.local_clip); }},
    {"step_clip", "--step-clip", OptionKind::kNumber, "a finite number >= 0", "",
     "step clipping: the averaged update's L2 norm is at most this, the part clipped off "
     "dropped (stale mass that diverges below d = 0.005 with momentum; 0: off)",
     "",
     [](C& c, V t) { c.convergence.step_clip = number(t, non_negative, "a finite number >= 0"); },
     [](const C& c) { return shown(c.convergence.step_clip); }},
    {"warmup_steps", "--warmup-steps", OptionKind::kInteger, "an integer >= 0", "",
     "density warm-up: the first this many steps run at densities from --warmup-start down to d, "
     "in 4 geometric phases (0: off)",
     "",
     [](C& c, V t) {
       c.convergence.warmup_steps = integer<std::int64_t>(t, 0, kMaxI64, "an integer >= 0");
     },
     [](const C& c) { return shown(c.convergence.warmup_steps); }},
    {"warmup_start", "--warmup-start", OptionKind::kNumber, "a number in (d, 1]", "",
     "the density warm-up's first density (1: dense)", "",
     [](C& c, V t) { c.convergence.warmup_start = number(t, fraction, "a number in (0, 1]"); },
     [](const C& c) { return shown(c.convergence.warmup_start); }},
    {"non_finite", "--non-finite", OptionKind::kChoice, "raise | skip", "",
     "a NaN or Inf in a rank's gradient: raise (refuse the step, naming the element) or skip "
     "(every rank's update is NaN, as a dense all-reduce would leave it, so fp16 AMP's "
     "GradScaler skips the step; residual, velocity and threshold keep their state)",
     "", [](C& c, V t) { c.convergence.non_finite = parse_non_finite(t); },
     [](const C& c) { return std::string(to_string(c.convergence.non_finite)); }},
    {"oktopk_period", "--oktopk-period", OptionKind::kInteger, "an integer in 1..2147483647",
     "oktopk", "iterations between exact re-evaluations of the local and global thresholds", "",
     [](C& c, V t) { c.oktopk.period = integer(t, 1, kMaxInt, "an integer in 1..2147483647"); },
     [](const C& c) { return shown(c.oktopk.period); }},
    {"oktopk_repartition", "--oktopk-repartition", OptionKind::kInteger,
     "an integer in 1..2147483647", "oktopk",
     "iterations between recomputations of the regions' boundaries", "",
     [](C& c, V t) {
       c.oktopk.repartition = integer(t, 1, kMaxInt, "an integer in 1..2147483647");
     },
     [](const C& c) { return shown(c.oktopk.repartition); }},
};

}  // namespace

const char* to_string(OptionKind k) {
  switch (k) {
    case OptionKind::kInteger:
      return "integer";
    case OptionKind::kNumber:
      return "number";
    case OptionKind::kChoice:
      return "choice";
    case OptionKind::kCap:
      return "word or number";
  }
  return "?";
}

std::string_view OptionSpec::primary_flag() const {
  return flag.substr(0, flag.find(','));
}

std::span<const OptionSpec> option_table() {
  return kOptions;
}

const OptionSpec* find_option_by_key(std::string_view key) {
  for (const auto& o : kOptions)
    if (o.key == key) return &o;
  return nullptr;
}

const OptionSpec* find_option_by_flag(std::string_view flag) {
  for (const auto& o : kOptions) {
    std::string_view rest = o.flag;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      if (rest.substr(0, comma) == flag) return &o;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return nullptr;
}

std::string default_text(const OptionSpec& o) {
  return o.default_text.empty() ? o.get(SparsifierConfig{}) : std::string(o.default_text);
}

std::string options_markdown() {
  std::string s =
      "| Python | command line | values | default | applies to | what it does |\n"
      "| --- | --- | --- | --- | --- | --- |\n";
  for (const auto& o : kOptions)
    s += detail::concat("| `", o.key, "` | `", o.primary_flag(), "` | ", o.values, " | ",
                        default_text(o), " | ", o.applies_to.empty() ? "all" : o.applies_to, " | ",
                        o.help, " |\n");
  return s;
}

}  // namespace exdyna::sparsifiers
