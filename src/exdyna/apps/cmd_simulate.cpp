// `exdyna simulate`: in-process workers on a synthetic or recorded gradient stream
// (sim/simulate.hpp).
#include <iostream>
#include <memory>

#include "exdyna/apps/commands.hpp"
#include "exdyna/apps/simulate_engines.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sim/simulate.hpp"

namespace exdyna::apps {

namespace {

struct SimulateArgs {
  sim::SimulateConfig cfg;
  int workers = sim::SimulateConfig::kDefaultWorkers;
  std::int64_t iterations = sim::SimulateConfig::kDefaultIterations;
  std::int64_t n_grad = sim::SimulateConfig::kDefaultNg;
  std::string trace, decisions, stats, gather = "padded", controller = "paper", balance = "paper";
  std::vector<std::string> scale_steps;
  double initial_threshold = -1, hard_threshold = -1;
  std::string worker_cap = "none";
  std::int64_t blocks = 1024;
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
  sub->add_option("--sparsifier", a.cfg.sparsifier,
                  "sparsifier: exdyna, topk, cltk, hard-threshold, sidco, dense")
      ->capture_default_str();
  auto* o_workers = sub->add_option("--workers", a.workers, "number of workers (a trace fixes it)")
                        ->capture_default_str();
  sub->add_option("--density", a.cfg.sparse.density, "target density d in (0, 1]")
      ->capture_default_str();
  auto* o_iter =
      sub->add_option("--iterations", a.iterations, "iterations T (a trace: at most its count)")
          ->capture_default_str();
  auto* o_ng = sub->add_option("--n-grad", a.n_grad, "gradient length n_g of the synthetic source")
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
  sub->add_option("--gather", a.gather,
                  "index all-gather: padded (as the paper) or exact (allgatherv)")
      ->capture_default_str();
  auto* o_blocks =
      sub->add_option("--blocks", a.blocks, "ExDyna: number of blocks n_b")->capture_default_str();
  sub->add_option("--controller", a.controller,
                  "ExDyna threshold controller: paper (Alg. 5), histogram or exact")
      ->capture_default_str();
  sub->add_option("--balance", a.balance, "ExDyna partition balance: paper or exact")
      ->capture_default_str();
  sub->add_option("--worker-cap", a.worker_cap,
                  "ExDyna exact controller: no worker sends more than CAP * k / n values; auto: "
                  "CAP = the Poisson floor 1 + sqrt(2 ln n / (k / n)); none or 0: no cap")
      ->capture_default_str();
  sub->add_option("--min-blk", a.cfg.sparse.exdyna.min_blk,
                  "ExDyna: fewest blocks a partition keeps (default n_b / (4 n))");
  sub->add_option("--initial-threshold", a.initial_threshold,
                  "ExDyna first threshold (default 1 / (2 sqrt(k)))");
  sub->add_option("--hard-threshold", a.hard_threshold,
                  "hard-threshold sparsifier's threshold (default 1 / (2 sqrt(k)))");
  sub->add_option("--scale-step", a.scale_steps,
                  "from iteration ITER on, multiply every gradient (synthetic source or trace) "
                  "by FACTOR (ITER:FACTOR, repeatable), like a learning-rate decay");
  sub->add_option("--layers", a.cfg.synthetic.layers, "synthetic source: contiguous layers")
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
  sub->add_option("--timeout", a.cfg.timeout_s, "seconds before a blocked collective fails")
      ->capture_default_str();

  // Engines (issue 3): local (in-process threads) stays the default; auto/gloo/mpi run one worker
  // per process (simulate_engines.hpp). --workers and --timeout are the options above.
  auto engine = std::make_shared<EngineCli>();
  engine->backend = "local";
  sub->add_option(
         "--backend", engine->backend,
         "engine: local (in-process threads), auto (mpi under mpirun, gloo under torchrun, "
         "else launch --workers processes), mpi, gloo")
      ->check(CLI::IsMember({"auto", "mpi", "gloo", "local"}))
      ->capture_default_str();
  sub->add_flag("--all-ranks-output", engine->all_ranks_output,
                "local launch: show every rank's standard output (default: rank 0 only)");
  sub->add_option("--listen", engine->listen, "gloo: address this rank listens on");

  sub->callback([&action, args, o_workers, o_iter, o_ng, o_blocks, engine] {
    action = [args, o_workers, o_iter, o_ng, o_blocks, engine] {
      auto& a = *args;
      auto cfg = a.cfg;
      // Unset options stay unset so a trace can supply workers and iterations.
      if (o_workers->count()) cfg.workers = a.workers;
      if (o_iter->count()) cfg.iterations = a.iterations;
      if (o_ng->count()) cfg.n_grad = a.n_grad;
      cfg.trace_dir = a.trace;
      cfg.decisions_path = a.decisions;
      cfg.stats_path = a.stats;
      cfg.sparse.gather_mode = comm::parse_gather_mode(a.gather);
      cfg.sparse.exdyna.controller = core::parse_controller(a.controller);
      cfg.sparse.exdyna.balance = core::parse_balance(a.balance);
      cfg.sparse.exdyna.worker_cap = core::parse_worker_cap(a.worker_cap);
      if (o_blocks->count()) cfg.sparse.exdyna.n_blocks = a.blocks;
      cfg.sparse.exdyna.initial_threshold = a.initial_threshold;
      cfg.sparse.hard_threshold = a.hard_threshold;
      for (const auto& s : a.scale_steps)
        cfg.synthetic.scale_steps.push_back(sim::parse_scale_step(s));
      if (engine->backend != "local") return simulate_on_engine(cfg, *engine, std::cout);
      return sim::simulate(cfg, sparsifiers::builtin_registry(), std::cout);
    };
  });
}

}  // namespace exdyna::apps
