// `exdyna simulate`: in-process workers on a synthetic or recorded gradient stream
// (sim/simulate.hpp).
#include <iostream>
#include <memory>

#include "exdyna/apps/cli_checks.hpp"
#include "exdyna/apps/commands.hpp"
#include "exdyna/apps/simulate_engines.hpp"
#include "exdyna/apps/sparsifier_cli.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sim/simulate.hpp"

namespace exdyna::apps {

namespace {

struct SimulateArgs {
  sim::SimulateConfig cfg;
  int workers = sim::SimulateConfig::kDefaultWorkers;
  std::int64_t iterations = sim::SimulateConfig::kDefaultIterations;
  std::int64_t n_grad = sim::SimulateConfig::kDefaultNg;
  std::string trace, decisions, stats;
  std::vector<std::string> scale_steps;
  SparsifierCli sparsifier;
  EngineCli engine;
};

}  // namespace

void add_simulate_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<SimulateArgs>();
  auto& a = *args;
  auto* sub =
      app.add_subcommand("simulate",
                         "run N workers (threads, or processes with --backend) for T iterations "
                         "of error feedback + a sparsifier on a synthetic or recorded gradient "
                         "stream, and print a summary");
  a.sparsifier.sparsifier = a.cfg.sparsifier;
  a.sparsifier.config = a.cfg.sparse;
  add_sparsifier_options(sub, a.sparsifier);
  auto* o_workers = sub->add_option("--workers", a.workers, "number of workers (a trace fixes it)")
                        ->check(int_between(1, 4096))
                        ->capture_default_str();
  auto* o_iter =
      sub->add_option("--iterations", a.iterations, "iterations T (a trace: at most its count)")
          ->check(int_at_least(1))
          ->capture_default_str();
  auto* o_ng = sub->add_option("--n-grad", a.n_grad, "gradient length n_g of the synthetic source")
                   ->check(int_at_least(1))
                   ->capture_default_str();
  auto* o_trace =
      sub->add_option("--trace", a.trace, "replay a trace directory (meta.json + grads.f32)");
  o_ng->excludes(o_trace);
  sub->add_option("--seed", a.cfg.seed, "seed of the synthetic source")->capture_default_str();
  sub->add_option("--decisions", a.decisions,
                  "write one CSV row per iteration: "
                  "iter,threshold,k_total,density,f_t,k_w*,alloc_w*,blocks_p*");
  sub->add_option("--stats", a.stats,
                  "write every per-iteration statistic (times, bytes, global error) as CSV; a path "
                  "with {rank} is written by every rank (its own times)");
  sub->add_flag("--resources", a.cfg.measure_resources,
                "print every rank's resident memory and open file descriptors after iteration "
                "min(1000, T/2) and at the end (a long run should hold both flat)");
  sub->add_option("--scale-step", a.scale_steps,
                  "from iteration ITER on, multiply every gradient (synthetic source or trace) "
                  "by FACTOR (ITER:FACTOR, repeatable), like a learning-rate decay");
  sub->add_option("--synthetic-layers,--layers", a.cfg.synthetic.layers,
                  "synthetic source: contiguous layers")
      ->capture_default_str();
  sub->add_option("--decay", a.cfg.synthetic.decay,
                  "synthetic source: scale shrinks like exp(-decay t)")
      ->capture_default_str();
  sub->add_option("--shared", a.cfg.synthetic.shared,
                  "synthetic source: fraction of variance shared by all workers")
      ->capture_default_str();
  sub->add_option("--grad-scale", a.cfg.synthetic.scale,
                  "synthetic source: overall multiplier of the gradient")
      ->capture_default_str();
  // Engines: local (in-process threads) stays the default; auto/gloo/mpi run one worker
  // per process (simulate_engines.hpp). --workers is the option above: unset, a trace fixes it.
  a.engine.timeout_s = a.cfg.timeout_s;
  add_engine_options(sub, a.engine, false, "local");

  sub->callback([&action, args, o_workers, o_iter, o_ng] {
    action = [args, o_workers, o_iter, o_ng] {
      auto& a = *args;
      auto cfg = a.cfg;
      apply(a.sparsifier, cfg.sparsifier, cfg.sparse);
      cfg.timeout_s = a.engine.timeout_s;
      // Unset options stay unset so a trace can supply workers and iterations.
      if (o_workers->count()) cfg.workers = a.workers;
      if (o_iter->count()) cfg.iterations = a.iterations;
      if (o_ng->count()) cfg.n_grad = a.n_grad;
      cfg.trace_dir = a.trace;
      cfg.decisions_path = a.decisions;
      cfg.stats_path = a.stats;
      // Without a CSV the run keeps a few numbers per iteration instead of every StepStats, so
      // a long run's memory stays flat (the summary and the decisions digest need no more).
      cfg.keep_steps = !a.decisions.empty() || !a.stats.empty();
      for (const auto& s : a.scale_steps)
        cfg.synthetic.scale_steps.push_back(
            parsed("--scale-step", [&] { return sim::parse_scale_step(s); }));
      if (a.engine.backend != "local") return simulate_on_engine(cfg, a.engine, std::cout);
      return sim::simulate(cfg, sparsifiers::builtin_registry(), std::cout);
    };
  });
}

}  // namespace exdyna::apps
