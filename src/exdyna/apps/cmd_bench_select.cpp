// `exdyna bench select`: the selection's CPU time per worker, paper mode against the exact
// controller (--controller exact --balance exact --worker-cap auto), on a recorded trace or the
// synthetic source (sim/select_bench.hpp). Prints the medians over iterations and the ratio.
#include <cstdio>
#include <memory>
#include <string>

#include "exdyna/apps/cli_checks.hpp"
#include "exdyna/apps/commands.hpp"
#include "exdyna/core/atomic_file.hpp"
#include "exdyna/sim/select_bench.hpp"

namespace exdyna::apps {

namespace {

struct BenchSelectOptions {
  std::string trace;
  int workers = sim::SimulateConfig::kDefaultWorkers;
  std::int64_t iterations = 100;
  std::int64_t n_grad = sim::SimulateConfig::kDefaultNg;
  double density = 0.01;
  sim::SelectBenchOptions bench;
  std::string per_step;  // CSV of every worker's every step (empty: none)
};

void print_mode(const sim::SelectBenchMode& m, const sim::SelectBenchTimes& t) {
  std::printf("%-6s %14.1f %14.1f %10zu %12.4f\n", m.name.c_str(), t.median_mean_s * 1e6,
              t.median_max_s * 1e6, t.mean_per_iteration.size(), m.mean_density);
}

void print_table(const sim::SelectBenchResult& r, bool solo) {
  std::printf("%-6s %14s %14s %10s %12s\n", "mode", "mean w (us)", "max w (us)", "samples",
              "density/d");
  print_mode(r.paper, solo ? r.paper.solo : r.paper.group);
  print_mode(r.exact, solo ? r.exact.solo : r.exact.group);
}

// The clock's own cost in these medians, and the ratios without it.
void print_clock(const sim::SelectBenchResult& r) {
  std::printf(
      "clock: an empty lap of the thread CPU clock reads %.2f us here; every step's time above "
      "holds %d laps (both modes)\n",
      r.clock_lap_s * 1e6, r.laps_per_step);
  const auto net = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", x);
    return x > 0 ? std::string(buf) : std::string("n/a (the clock's cost exceeds paper's)");
  };
  std::printf("ratio exact/paper net of the clock (mean over workers): %s",
              net(r.net_ratio_mean(false)).c_str());
  if (r.solo) std::printf(", solo %s", net(r.net_ratio_mean(true)).c_str());
  std::printf("\n");
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
  sub->add_option("--repeat", o->bench.repeat, "replays of each mode (alternating)")
      ->check(int_at_least(1))
      ->capture_default_str();
  sub->add_flag("--solo,!--no-solo", o->bench.solo,
                "also re-run each worker alone from a tape of its collectives (default: on)");
  sub->add_option("--solo-runs", o->bench.solo_runs,
                  "re-runs of each worker alone per replay; the least CPU time of each step counts")
      ->check(int_at_least(1))
      ->capture_default_str();
  sub->add_option("--per-step", o->per_step,
                  "write every worker's every step as CSV (mode, series, replay, iteration, "
                  "worker, partition, candidates, kept, select_cpu_us): the input of "
                  "scripts/select_cost_model.py");
  sub->callback([&action, o, o_workers, o_iter, o_ng] {
    action = [o, o_workers, o_iter, o_ng] {
      sim::check_output_path(o->per_step, "--per-step");
      sim::SimulateConfig cfg;
      cfg.trace_dir = o->trace;
      cfg.sparse.density = o->density;
      // As in simulate: unset options stay unset so a trace can supply them.
      if (o_workers->count() || o->trace.empty()) cfg.workers = o->workers;
      if (o_iter->count() || o->trace.empty()) cfg.iterations = o->iterations;
      if (o_ng->count() || o->trace.empty()) cfg.n_grad = o->n_grad;
      const auto r = sim::bench_select(cfg, o->bench);
      std::printf("exdyna bench select: %s, density %g, %d replay(s) of each mode\n",
                  o->trace.empty() ? "synthetic source" : ("trace " + o->trace).c_str(), o->density,
                  o->bench.repeat);
      std::printf(
          "selection CPU time per worker and iteration (thread CPU clock), medians over "
          "iterations\n");
      std::printf("group: the %s workers' threads together on this machine's cores\n",
                  cfg.trace_dir.empty() ? std::to_string(o->workers).c_str() : "trace's");
      print_table(r, false);
      std::printf("ratio exact/paper: %.2f (mean over workers), %.2f (slowest worker)\n",
                  r.ratio_mean(), r.ratio_max());
      if (o->bench.solo && !r.solo)
        std::printf(
            "solo: not measured (the tapes of the collectives would exceed 2 GiB: fewer "
            "--iterations)\n");
      if (r.solo) {
        std::printf(
            "solo: each worker alone on one thread, its collectives replayed from the group "
            "run (the same steps; a machine per worker), the least of %d runs per step\n",
            o->bench.solo_runs);
        print_table(r, true);
        std::printf("solo ratio exact/paper: %.2f (mean over workers), %.2f (slowest worker)\n",
                    r.solo_ratio_mean(), r.solo_ratio_max());
      }
      print_clock(r);
      if (!o->per_step.empty()) {
        core::write_file_atomic(o->per_step, sim::select_steps_csv(r));
        std::printf("per step: %s\n", o->per_step.c_str());
      }
      return 0;
    };
  });
}

}  // namespace exdyna::apps
