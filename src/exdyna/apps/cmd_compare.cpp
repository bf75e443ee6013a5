// `exdyna compare`: the sparsifiers side by side on emulated hosts (eval/matrix.hpp), then the
// short training runs (eval/efficiency.hpp) and the report (eval/report.hpp).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "exdyna/apps/cli_checks.hpp"
#include "exdyna/apps/commands.hpp"
#include "exdyna/apps/compare_ddp.hpp"
#include "exdyna/apps/sparsifier_cli.hpp"
#include "exdyna/comm/engines/launcher.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/eval/efficiency.hpp"
#include "exdyna/eval/hosts.hpp"
#include "exdyna/eval/matrix.hpp"
#include "exdyna/eval/report.hpp"
#include "exdyna/sim/trace_format.hpp"
#include "exdyna/sparsifiers/factory.hpp"

namespace exdyna::apps {

namespace {

struct CompareArgs {
  std::vector<std::string> sparsifiers = eval::default_labels();
  std::vector<std::string> workers{"2", "4", "8"};
  std::vector<std::string> bandwidth{"1gbit", "10gbit"};
  std::vector<std::string> density{"0.01", "0.001"};
  std::int64_t n_grad = 25'600'000;
  std::string trace;
  double compute_ms = 0;
  int iterations = 3, warmup = -1;
  std::string delay = "50us", loss = "0";
  std::string out = "exdyna-compare-out";
  std::string network = "emulated";
  bool quick = false, report_only = false, no_train = false;
  double timeout_s = 120;
  std::string gnuplot = "gnuplot";
  // The shared sparsifier options that tune without choosing (apps/sparsifier_cli.hpp), and the
  // ones the user gave, forwarded to the cells they apply to.
  SparsifierCli tuning;
  std::vector<GivenOption> given;
  std::string command_line;
  CompareDdpArgs ddp;  // --ddp: the DDP head-to-head (apps/compare_ddp.hpp)
};

std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("exdyna") : p.string();
}

// A given option that a selected label fixes would silently lose to it or override it: refused.
// So is one that tunes a sparsifier no selected label runs.
void check_given_options(const std::vector<GivenOption>& given,
                         const std::vector<std::string>& labels) {
  for (const auto& g : given) {
    bool applies = g.applies_to.empty();
    for (const auto& l : labels) {
      const auto v = eval::variant_for(l);
      if (!g.applies_to.empty() && v.sparsifier != g.applies_to) continue;
      applies = true;
      const auto fixed = std::find(v.args.begin(), v.args.end(), g.name);
      if (fixed == v.args.end()) continue;
      std::string sets;
      for (const auto& a : v.args) sets += (sets.empty() ? "" : " ") + a;
      throw InvalidArgument(detail::concat(g.name, " ", g.value, ": the label ", l,
                                           " in --sparsifiers fixes it (", sets, "); leave ",
                                           g.name, " out, or compare the label ", v.sparsifier,
                                           " (which takes it) without ", l));
    }
    EXDYNA_CHECK_ARG(applies, g.name, " ", g.value, " tunes ", g.applies_to,
                     ", but no label in --sparsifiers runs ", g.applies_to);
  }
}

// The given options as simulate arguments, grouped by the sparsifier they apply to.
std::vector<eval::ExtraArgs> forwarded_args(const std::vector<GivenOption>& given) {
  std::vector<eval::ExtraArgs> out;
  for (const auto& g : given) out.push_back({g.applies_to, {g.name, g.value}});
  return out;
}

// Refuses before anything runs what a cell's `exdyna simulate` would refuse: its label's options
// with the forwarded ones, bound to the cell's gradient length, workers and density.
void check_cells(const eval::MatrixOptions& m) {
  const std::int64_t n_g = m.trace_dir.empty() ? m.n_grad : sim::read_trace_meta(m.trace_dir).n_g;
  for (const auto& l : m.labels) {
    const auto v = eval::variant_for(l);
    for (const int w : m.workers)
      for (const double d : m.densities) {
        CLI::App cell;
        SparsifierCli cli;
        add_sparsifier_options(&cell, cli);
        std::vector<std::string> args{"--sparsifier", v.sparsifier};
        args.insert(args.end(), v.args.begin(), v.args.end());
        const auto extra = eval::extra_args_for(m.extra_simulate_args, v);
        args.insert(args.end(), extra.begin(), extra.end());
        std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
        cell.parse(args);
        std::string name;
        sparsifiers::SparsifierConfig config;
        apply(cli, name, config);
        config.density = d;
        try {
          sparsifiers::check_sparsifier(sparsifiers::builtin_registry(), name,
                                        sparsifiers::bind(config, n_g, w, 0));
        } catch (const InvalidArgument& e) {
          throw InvalidArgument(
              detail::concat("cell ", l, " at --workers ", w, ", --density ", d, ": ", e.what()));
        }
      }
  }
}

// The matrix options from the command line (every value checked, bad ones name themselves).
eval::MatrixOptions matrix_options(const CompareArgs& a) {
  eval::MatrixOptions m;
  m.exdyna = self_exe();
  m.out_dir = a.out;
  m.labels.clear();
  for (const auto& l : a.sparsifiers) m.labels.push_back(eval::variant_for(l).label);
  m.workers.clear();
  for (const auto& w : a.workers) m.workers.push_back(parse_int_in(w, "--workers", 1, 250));
  m.bandwidths.clear();
  for (const auto& b : a.bandwidth) m.bandwidths.push_back(eval::parse_rate(b, "--bandwidth"));
  m.densities.clear();
  for (const auto& d : a.density) m.densities.push_back(parse_density(d, "--density"));
  EXDYNA_CHECK_ARG(
      !m.labels.empty() && !m.workers.empty() && !m.bandwidths.empty() && !m.densities.empty(),
      "--sparsifiers, --workers, --bandwidth and --density need one value at least");
  EXDYNA_CHECK_ARG(a.n_grad >= 1024 && a.n_grad <= (std::int64_t{1} << 31), "--n-grad ", a.n_grad,
                   " is not valid; expected 1024 .. 2^31");
  m.n_grad = a.n_grad;
  m.trace_dir = a.trace;
  EXDYNA_CHECK_ARG(std::isfinite(a.compute_ms) && a.compute_ms >= 0, "--compute-ms ", a.compute_ms,
                   " is not valid; expected >= 0");
  m.compute_ms = a.compute_ms;
  EXDYNA_CHECK_ARG(a.iterations >= 1 && a.iterations <= 100000, "--iterations ", a.iterations,
                   " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(a.warmup >= -1 && a.warmup <= 100000, "--warmup ", a.warmup,
                   " is not valid; expected >= 0, or -1 for auto");
  m.iterations = a.iterations;
  m.warmup = a.warmup;
  m.delay_us = eval::parse_delay_us(a.delay, "--delay");
  m.loss_pct = eval::parse_loss_pct(a.loss, "--loss");
  EXDYNA_CHECK_ARG(a.network == "emulated" || a.network == "model", "--network '", a.network,
                   "' is not valid; expected emulated or model");
  m.emulated = a.network == "emulated";
  EXDYNA_CHECK_ARG(std::isfinite(a.timeout_s) && a.timeout_s > 0, "--timeout ", a.timeout_s,
                   " is not valid; expected seconds > 0");
  m.timeout_s = a.timeout_s;
  check_given_options(a.given, m.labels);
  m.extra_simulate_args = forwarded_args(a.given);
  check_cells(m);
  return m;
}

void say(const std::string& line) {
  std::cout << line << std::endl;  // progress is read live: flush every line
}

int report(const CompareArgs& a) {
  eval::ReportOptions ro;
  ro.command_line = a.command_line;
  ro.gnuplot = a.gnuplot;
  const auto r = eval::write_report(a.out, ro);
  say("report: " + r.report.string());
  for (const auto& n : r.notes) say("  note: " + n);
  return 0;
}

int train(const CompareArgs& a) {
  eval::EfficiencyOptions eo;
  eo.exdyna_binary = self_exe();
  eo.labels = a.sparsifiers;
  if (a.quick) eo.epochs = 1, eo.train_limit = 640, eo.test_limit = 200;
  const auto r = eval::run_efficiency(eo, a.out, say);
  for (const auto& f : r.failed) say("  training failed: " + f);
  return r.failed.empty() ? 0 : 1;
}

int run_compare(CompareArgs a) {
  if (a.report_only) return report(a);
  const auto m = matrix_options(a);
  if (m.emulated) {
    const auto why = eval::netns_unavailable_reason();
    if (!why.empty()) {
      std::cerr << "exdyna: compare: " << why << "; use --network model for the alpha-beta model "
                << "instead\n";
      return 2;
    }
    const int stale = eval::remove_stale_sets();
    if (stale > 0) say("removed " + std::to_string(stale) + " namespaces left by a killed run");
  }
  const auto cells = eval::plan_cells(m);
  say("compare: " + std::to_string(cells.size()) + " cells into " + a.out +
      (m.emulated ? " (emulated hosts)" : " (model network)"));
  const auto res = eval::run_matrix(m, say);
  say("matrix: " + std::to_string(res.ran) + " cells run, " + std::to_string(res.kept) + " kept, " +
      std::to_string(res.failed) + " failed in " + std::to_string(static_cast<int>(res.wall_s)) +
      " s");
  for (const auto& f : res.failures) std::cerr << "exdyna: compare: cell " << f << "\n";
  int rc = res.failed > 0 ? 1 : 0;
  if (!a.no_train) rc = std::max(rc, train(a));
  report(a);
  return rc;
}

// `compare --ddp`: the head-to-head's own defaults (4 hosts at 100 Mbit/s and 1 Gbit/s, where the
// link limits a dense step, in about 15 minutes on 2 vCPUs; --quick: 2 hosts at 1 Gbit/s); the
// sparsifier matrix's options are refused, not ignored.
int ddp_action(CompareArgs& a, const CLI::App& sub, const CLI::Option& o_w, const CLI::Option& o_b,
               const CLI::Option& o_d) {
  for (const char* name : {"--sparsifiers", "--n-grad", "--trace", "--iterations", "--warmup",
                           "--compute-ms", "--loss", "--no-train", "--network"})
    EXDYNA_CHECK_ARG(sub.count(name) == 0, name,
                     " is an option of the sparsifier matrix; --ddp does not take it");
  EXDYNA_CHECK_ARG(o_d.count() == 0,
                   "--density: --ddp takes the densities in its hook names "
                   "(--ddp-hooks exdyna-d0.01)");
  EXDYNA_CHECK_ARG(a.given.empty(), a.given.empty() ? "" : a.given.front().name,
                   ": --ddp runs exdyna.ddp.State's defaults (the exact controller)");
  CompareCommon c;
  c.out = sub.get_option("--out")->count() ? a.out : std::string("exdyna-compare-ddp-out");
  c.workers = o_w.count() ? a.workers : std::vector<std::string>{a.quick ? "2" : "4"};
  c.bandwidth = o_b.count() ? a.bandwidth
                            : (a.quick ? std::vector<std::string>{"1gbit"}
                                       : std::vector<std::string>{"100mbit", "1gbit"});
  c.delay = a.delay;
  c.quick = a.quick;
  c.report_only = a.report_only;
  c.timeout_s = sub.get_option("--timeout")->count() ? a.timeout_s : 600;
  c.gnuplot = a.gnuplot;
  c.command_line = a.command_line;
  return run_compare_ddp(a.ddp, c);
}

}  // namespace

void add_compare_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<CompareArgs>();
  auto& a = *args;
  auto* sub = app.add_subcommand(
      "compare",
      "run the sparsifiers side by side on emulated hosts (network namespaces, tc-shaped links), "
      "train them briefly, and write a report");
  sub->add_option(
         "--sparsifiers", a.sparsifiers,
         "labels: exdyna-paper, exdyna-exact (exact controller, balance and worker cap auto), "
         "exdyna-exact-paper-balance, or any sparsifier: " +
             sparsifiers::builtin_registry().names_text())
      ->delimiter(',')
      ->capture_default_str();
  auto* o_w = sub->add_option("--workers", a.workers, "hosts (ranks) per setting")
                  ->delimiter(',')
                  ->capture_default_str();
  auto* o_b = sub->add_option("--bandwidth", a.bandwidth, "link rates, e.g. 100mbit,1gbit,10gbit")
                  ->delimiter(',')
                  ->capture_default_str();
  auto* o_d = sub->add_option("--density", a.density, "target densities")
                  ->delimiter(',')
                  ->capture_default_str();
  auto* o_ng = sub->add_option("--n-grad", a.n_grad, "synthetic gradient length (ResNet-50: 25.6M)")
                   ->capture_default_str();
  auto* o_tr = sub->add_option("--trace", a.trace, "replay a recorded trace instead");
  o_ng->excludes(o_tr);
  sub->add_option("--compute-ms", a.compute_ms,
                  "forward + backward time added to every iteration (not measured here)")
      ->capture_default_str();
  auto* o_it = sub->add_option("--iterations", a.iterations, "measured iterations per cell")
                   ->capture_default_str();
  sub->add_option("--warmup", a.warmup,
                  "iterations per cell run before measuring; -1: auto (workers + 1 for ExDyna and "
                  "CLT-k, whose roles rotate over the workers, at least 3; else 2)")
      ->capture_default_str();
  sub->add_option("--delay", a.delay, "one-way delay of each link (needs sch_netem)")
      ->capture_default_str();
  sub->add_option("--loss", a.loss, "packet loss of each link, percent (needs sch_netem)")
      ->capture_default_str();
  sub->add_option("--out", a.out, "output directory")->capture_default_str();
  sub->add_option("--network", a.network,
                  "emulated (namespaces, needs root or CAP_NET_ADMIN) or model (alpha-beta)")
      ->capture_default_str();
  sub->add_flag("--quick", a.quick, "a 2x2 matrix (2,4 hosts x 1,10 gbit) at n_g = 2^20, d = 0.01");
  sub->add_flag("--report-only", a.report_only, "regenerate the report from the files in --out");
  sub->add_flag("--no-train", a.no_train, "skip the training-efficiency runs");
  sub->add_option("--timeout", a.timeout_s, "seconds a collective may block")
      ->capture_default_str();
  sub->add_option("--gnuplot", a.gnuplot, "gnuplot binary for the figures")->capture_default_str();
  // Given ones go to every cell they apply to (the ExDyna options to the exdyna cells only); one
  // that a selected label fixes (--controller with exdyna-paper) is refused, not overridden.
  add_tuning_options(sub, a.tuning);
  add_compare_ddp_options(sub, a.ddp);
  sub->footer(
      "Sparsifier options (--gather ... --sidco-stages) go to every cell they apply to: "
      "--gather to all, the ExDyna options to the exdyna* labels, --hard-threshold to "
      "hard-threshold, --sidco-stages to sidco, --randomk-seed to randomk, --dgc-sample to dgc, "
      "--oktopk-period and --oktopk-repartition to oktopk. One that a selected "
      "label fixes (--controller, "
      "--balance or --worker-cap with exdyna-paper or exdyna-exact) is refused: compare the "
      "label exdyna to choose them.");
  sub->callback([&action, args, sub, o_w, o_b, o_d, o_ng, o_it] {
    auto& a = *args;
    a.given = given_tuning_options(*sub);
    a.command_line = "exdyna";
    const auto argv = comm::self_argv();
    for (std::size_t i = 1; i < argv.size(); ++i) a.command_line += " " + argv[i];
    if (a.ddp.ddp) {
      action = [args, sub, o_w, o_b, o_d] { return ddp_action(*args, *sub, *o_w, *o_b, *o_d); };
      return;
    }
    if (a.quick) {
      if (o_w->count() == 0) a.workers = {"2", "4"};
      if (o_b->count() == 0) a.bandwidth = {"1gbit", "10gbit"};
      if (o_d->count() == 0) a.density = {"0.01"};
      if (o_ng->count() == 0) a.n_grad = 1 << 20;
      if (o_it->count() == 0) a.iterations = 2;
    }
    action = [args] { return run_compare(*args); };
  });
}

}  // namespace exdyna::apps
