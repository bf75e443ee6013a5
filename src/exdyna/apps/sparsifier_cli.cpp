#include "exdyna/apps/sparsifier_cli.hpp"
#include "exdyna/apps/cli_checks.hpp"

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/registry.hpp"

namespace exdyna::apps {

namespace {

void add_exdyna_options(CLI::App* sub, SparsifierCli& s, const SparsifierDefaults& d) {
  auto& ex = s.config.exdyna;
  sub->add_option("--blocks", ex.n_blocks, "ExDyna: number of blocks n_b")
      ->check(int_at_least(1))
      ->capture_default_str();
  sub->add_option("--min-blk", ex.min_blk,
                  "ExDyna: fewest blocks a partition keeps (default n_b / (4 n))")
      ->check(positive_number());
  sub->add_option("--initial-threshold", ex.initial_threshold,
                  "ExDyna: first threshold (default 1 / (2 sqrt(k)))")
      ->check(positive_number());
  s.controller = d.controller;
  sub->add_option("--controller", s.controller,
                  "ExDyna threshold controller: paper (Alg. 5), histogram or exact")
      ->capture_default_str();
  s.balance = d.balance;
  sub->add_option("--balance", s.balance, "ExDyna partition balance: paper (Alg. 3) or exact")
      ->capture_default_str();
  s.worker_cap = d.worker_cap;
  const std::string cap_help =
      "ExDyna exact controller: no worker sends more than CAP * k / n values; auto: CAP = the "
      "Poisson floor 1 + sqrt(2 ln n / (k / n)); none or 0: no cap";
  auto* cap = sub->add_option("--worker-cap", s.worker_cap, cap_help);
  if (d.worker_cap.empty())
    cap->description(cap_help + " (default: auto with the exact controller, else none)");
  else
    cap->capture_default_str();
}

// Every tuning option and the sparsifier it tunes (empty: all), in registration order.
struct Tuning {
  const char* name;
  const char* applies_to;
};
constexpr Tuning kTuning[] = {
    {"--gather", ""},
    {"--values", ""},
    {"--blocks", "exdyna"},
    {"--min-blk", "exdyna"},
    {"--initial-threshold", "exdyna"},
    {"--controller", "exdyna"},
    {"--balance", "exdyna"},
    {"--worker-cap", "exdyna"},
    {"--hard-threshold", "hard-threshold"},
    {"--sidco-stages", "sidco"},
    {"--randomk-seed", "randomk"},
    {"--dgc-sample", "dgc"},
    {"--oktopk-period", "oktopk"},
    {"--oktopk-repartition", "oktopk"},
};

}  // namespace

void add_sparsifier_options(CLI::App* sub, SparsifierCli& s, const SparsifierDefaults& d) {
  sub->add_option("--sparsifier", s.sparsifier,
                  "sparsifier: " + sparsifiers::builtin_registry().names_text())
      ->capture_default_str();
  sub->add_option("--density", s.config.density, "target density d in (0, 1]")
      ->check(positive_at_most(1))
      ->capture_default_str();
  add_tuning_options(sub, s, d);
}

void add_tuning_options(CLI::App* sub, SparsifierCli& s, const SparsifierDefaults& d) {
  sub->add_option("--gather,--gather-mode", s.gather,
                  "index all-gather: padded (as the paper) or exact (allgatherv)")
      ->capture_default_str();
  sub->add_option("--values", s.values,
                  "format of the values sent: fp32, or fp16 / bf16 (2 bytes each; the rounding "
                  "error stays in the residual)")
      ->capture_default_str();
  add_exdyna_options(sub, s, d);
  sub->add_option("--hard-threshold", s.config.hard_threshold,
                  "hard-threshold sparsifier's threshold (default 1 / (2 sqrt(k)))")
      ->check(positive_number());
  sub->add_option("--sidco-stages", s.config.sidco.stages,
                  "SIDCo: stages of the multi-stage exponential fit (1..10)")
      ->check(int_between(1, 10))
      ->capture_default_str();
  sub->add_option("--randomk-seed", s.config.randomk.seed,
                  "Random-k: seed of the indices every rank draws (with the iteration)")
      ->capture_default_str();
  sub->add_option(
         "--dgc-sample", s.config.dgc.sample,
         "DGC: fraction of the gradient sampled for its threshold (at least 64 / d values)")
      ->check(positive_at_most(1))
      ->capture_default_str();
  sub->add_option("--oktopk-period", s.config.oktopk.period,
                  "Ok-Topk: iterations between exact re-evaluations of its thresholds")
      ->check(int_at_least(1))
      ->capture_default_str();
  sub->add_option("--oktopk-repartition", s.config.oktopk.repartition,
                  "Ok-Topk: iterations between recomputations of the regions' boundaries")
      ->check(int_at_least(1))
      ->capture_default_str();
}

std::vector<GivenOption> given_tuning_options(const CLI::App& sub) {
  std::vector<GivenOption> out;
  for (const auto& t : kTuning) {
    const CLI::Option* o = sub.get_option_no_throw(t.name);
    EXDYNA_CHECK(o != nullptr, "sparsifier_cli: ", t.name, " is not registered");
    if (o->count() > 0) out.push_back({t.name, o->as<std::string>(), t.applies_to});
  }
  return out;
}

void apply(const SparsifierCli& s, std::string& name, sparsifiers::SparsifierConfig& config) {
  name = s.sparsifier;
  config = s.config;
  config.gather_mode = parsed("--gather", [&] { return comm::parse_gather_mode(s.gather); });
  config.values = parsed("--values", [&] { return core::parse_value_format(s.values); });
  auto& ex = config.exdyna;
  ex.controller =
      parsed("--controller", [&] { return sparsifiers::parse_controller(s.controller); });
  ex.balance = parsed("--balance", [&] { return sparsifiers::parse_balance(s.balance); });
  // The cap at the Poisson floor holds f(t) there on real gradients at no measurable cost in
  // density or global error (docs/controller.md); it needs the exact controller.
  if (!s.worker_cap.empty())
    ex.worker_cap =
        parsed("--worker-cap", [&] { return sparsifiers::parse_worker_cap(s.worker_cap); });
  else
    ex.worker_cap =
        ex.controller == sparsifiers::Controller::kExact ? sparsifiers::ExDynaOptions::kAutoCap : 0;
}

}  // namespace exdyna::apps
