// `exdyna bench select`: the selection's CPU time per worker, paper mode against the exact
// controller (--controller exact --balance exact --worker-cap auto), on a recorded trace or the
// synthetic source (sim/select_bench.hpp). Prints the medians over iterations and the ratio.
#include <cstdio>
#include <memory>
#include <string>

#include "exdyna/apps/cli_checks.hpp"
#include "exdyna/apps/commands.hpp"
#include "exdyna/sim/select_bench.hpp"

namespace exdyna::apps {

namespace {

struct BenchSelectOptions {
  std::string trace;
  int workers = sim::SimulateConfig::kDefaultWorkers;
  std::int64_t iterations = 100;
  std::int64_t n_grad = sim::SimulateConfig::kDefaultNg;
  double density = 0.01;
  int repeat = 3;
};

void print_mode(const sim::SelectBenchMode& m) {
  std::printf("%-6s %14.1f %14.1f %10zu %12.4f\n", m.name.c_str(), m.median_mean_s * 1e6,
              m.median_max_s * 1e6, m.mean_per_iteration.size(), m.mean_density);
}

}  // namespace

void add_bench_select_command(CLI::App& bench, Action& action) {
  auto* sub = bench.add_subcommand(
      "select", "selection CPU time per worker: paper mode against the exact controller");
  auto o = std::make_shared<BenchSelectOptions>();
  sub->add_option("--trace", o->trace, "replay a trace directory (it fixes workers and n_g)");
  auto* o_workers = sub->add_option("--workers", o->workers, "workers of the synthetic source")
                        ->check(int_at_least(1))
                        ->capture_default_str();
  auto* o_iter = sub->add_option("--iterations", o->iterations,
                                 "iterations per replay (a trace: at most its count)")
                     ->check(int_at_least(1))
                     ->capture_default_str();
  auto* o_ng = sub->add_option("--n-grad", o->n_grad, "gradient length of the synthetic source")
                   ->check(int_at_least(1))
                   ->capture_default_str();
  sub->add_option("--density", o->density, "target density d in (0, 1]")
      ->check(positive_at_most(1.0))
      ->capture_default_str();
  sub->add_option("--repeat", o->repeat, "replays of each mode (alternating)")
      ->check(int_at_least(1))
      ->capture_default_str();
  sub->callback([&action, o, o_workers, o_iter, o_ng] {
    action = [o, o_workers, o_iter, o_ng] {
      sim::SimulateConfig cfg;
      cfg.trace_dir = o->trace;
      cfg.sparse.density = o->density;
      // As in simulate: unset options stay unset so a trace can supply them.
      if (o_workers->count() || o->trace.empty()) cfg.workers = o->workers;
      if (o_iter->count() || o->trace.empty()) cfg.iterations = o->iterations;
      if (o_ng->count() || o->trace.empty()) cfg.n_grad = o->n_grad;
      const auto r = sim::bench_select(cfg, o->repeat);
      std::printf("exdyna bench select: %s, density %g, %d replay(s) of each mode\n",
                  o->trace.empty() ? "synthetic source" : ("trace " + o->trace).c_str(), o->density,
                  o->repeat);
      std::printf(
          "selection CPU time per worker and iteration (thread CPU clock), medians over "
          "iterations\n");
      std::printf("%-6s %14s %14s %10s %12s\n", "mode", "mean w (us)", "max w (us)", "samples",
                  "density/d");
      print_mode(r.paper);
      print_mode(r.exact);
      std::printf("ratio exact/paper: %.2f (mean over workers), %.2f (slowest worker)\n",
                  r.ratio_mean(), r.ratio_max());
      return 0;
    };
  });
}

}  // namespace exdyna::apps
