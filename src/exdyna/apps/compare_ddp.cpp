#include "exdyna/apps/compare_ddp.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <vector>

#include "exdyna/apps/cli_checks.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/eval/ddp_matrix.hpp"
#include "exdyna/eval/hosts.hpp"
#include "exdyna/eval/rank_launch.hpp"

namespace exdyna::apps {

namespace fs = std::filesystem;

namespace {

void say(const std::string& line) {
  std::cout << line << std::endl;
}

// word in single quotes for std::system's shell.
std::string shell_quoted(const std::string& word) {
  std::string quoted = "'";
  for (const char ch : word) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// Whether `python` imports torch and exdyna.ddp in this process's environment (PYTHONPATH), which
// the ranks inherit.
bool imports_exdyna(const std::string& python) {
  return std::system(
             (shell_quoted(python) + " -c 'import torch, exdyna.ddp' >/dev/null 2>&1").c_str()) ==
         0;
}

// Whether `python`'s torch has what exdyna.fsdp needs (FSDP2 with set_all_reduce_hook).
bool has_fsdp2(const std::string& python) {
  return std::system((shell_quoted(python) +
                      " -c 'import sys, exdyna.fsdp; sys.exit(not exdyna.fsdp.available())' "
                      ">/dev/null 2>&1")
                         .c_str()) == 0;
}

// The interpreter of the ranks and the report: --python, else the first of the active venv's, the
// one the build found (EXDYNA_BUILD_PYTHON) and python3 that imports torch and exdyna: a python3
// on PATH without torch (pyenv) would otherwise fail every run.
std::string pick_python(const std::string& given) {
  std::vector<std::string> candidates;
  if (!given.empty()) {
    candidates.push_back(given);
  } else {
    if (const char* venv = std::getenv("VIRTUAL_ENV"))
      candidates.push_back(std::string(venv) + "/bin/python");
#ifdef EXDYNA_BUILD_PYTHON
    candidates.push_back(EXDYNA_BUILD_PYTHON);
#endif
    candidates.push_back("python3");
  }
  std::string tried;
  for (const auto& c : candidates) {
    if (imports_exdyna(c)) return c;
    tried += (tried.empty() ? "" : ", ") + c;
  }
  throw InvalidArgument(detail::concat(
      "--python: ", tried,
      " cannot import torch and exdyna.ddp; expected an interpreter with both "
      "(pass --python PATH; for the build tree's package set PYTHONPATH=build/python)"));
}

// An HSDP hook under a torch without FSDP2 is refused here, before any run, not as a failed row.
void check_fsdp2(const std::vector<std::string>& hooks, const std::string& python) {
  for (const auto& h : hooks)
    EXDYNA_CHECK_ARG(!eval::is_hsdp_hook(h) || has_fsdp2(python), "--ddp-hooks ", h,
                     ": needs FSDP2 (fully_shard with set_all_reduce_hook, torch >= 2.7: "
                     "exdyna.fsdp.MIN_TORCH); the torch of --python ",
                     python, " lacks it");
}

// --ddp-device by name, and with the HSDP hooks, which the script runs on the CPU only.
std::string checked_device(const std::string& device, const std::vector<std::string>& hooks) {
  eval::check_ddp_device(device);
  for (const auto& h : hooks)
    EXDYNA_CHECK_ARG(device == "cpu" || !eval::is_hsdp_hook(h), "--ddp-hooks ", h,
                     ": the HSDP hooks run on the CPU only; expected --ddp-device cpu, not '",
                     device, "'");
  return device;
}

// --ddp-device cuda is refused here, before any run, where the ranks' torch sees no GPU (every run
// would fail alike).
void check_cuda(const std::string& device, const std::string& python) {
  if (device != "cuda") return;
  const bool seen =
      std::system((shell_quoted(python) +
                   " -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' >/dev/null "
                   "2>&1")
                      .c_str()) == 0;
  EXDYNA_CHECK_ARG(seen, "--ddp-device cuda: the torch of --python ", python,
                   " sees no GPU (torch.cuda.is_available() is False); expected a machine with a "
                   "GPU and a CUDA build of torch, or --ddp-device cpu");
}

// The scripts live in the source tree's examples/ (EXDYNA_SOURCE_DIR, set by CMake); an installed
// exdyna names them with --ddp-script and --ddp-report-script.
std::string source_file(const std::string& given, const char* name, const char* option) {
  const std::string p =
      given.empty() ? std::string(EXDYNA_SOURCE_DIR) + "/examples/" + name : given;
  EXDYNA_CHECK_ARG(fs::is_regular_file(p), option, " '", p, "' is not a file");
  return p;
}

// The names first, then the interpreter: a bad hook is refused without one.
eval::DdpOptions ddp_options(const CompareDdpArgs& d, const CompareCommon& c) {
  eval::DdpOptions o;
  o.models = d.models;
  if (o.models.empty())
    o.models = c.quick ? std::vector<std::string>{"cnn"} : std::vector<std::string>{"cnn", "lstm"};
  for (const auto& m : o.models) eval::check_ddp_model(m);
  o.hooks = d.hooks.empty() ? eval::default_ddp_hooks() : d.hooks;
  for (const auto& h : o.hooks) eval::check_ddp_hook(h);
  EXDYNA_CHECK_ARG(d.ranks_per_host >= 1 && d.ranks_per_host <= 16, "--ddp-ranks-per-host ",
                   d.ranks_per_host, " is not valid; expected 1 .. 16");
  o.ranks_per_host = d.ranks_per_host;
  eval::check_hsdp_setting(o.hooks, o.models, o.ranks_per_host);
  o.device = checked_device(d.device, o.hooks);
  o.python = pick_python(d.python);
  check_fsdp2(o.hooks, o.python);
  check_cuda(o.device, o.python);
  o.script = source_file(d.script, "ddp_hooks.py", "--ddp-script");
  for (const auto& w : c.workers) o.workers.push_back(parse_int_in(w, "--workers", 1, 64));
  for (const auto& b : c.bandwidth) o.bandwidths.push_back(eval::parse_rate(b, "--bandwidth"));
  EXDYNA_CHECK_ARG(d.steps >= 0 && d.steps <= 1000000, "--ddp-steps ", d.steps,
                   " is not valid; expected 1 .. 1000000 (0: the default)");
  EXDYNA_CHECK_ARG(d.eval_every >= 0, "--ddp-eval-every ", d.eval_every,
                   " is not valid; expected >= 1 (0: the default)");
  // The CNN's default is longer: a sparse hook's first steps move it less than a dense one's (the
  // dropped gradient returns later through the residual), and its steps are short.
  o.steps_cnn = d.steps > 0 ? d.steps : (c.quick ? 12 : 200);
  o.steps_lstm = d.steps > 0 ? d.steps : (c.quick ? 12 : 100);
  EXDYNA_CHECK_ARG(d.budget_s < 0 || (d.budget_s <= 86400 && !std::isnan(d.budget_s)),
                   "--ddp-budget ", d.budget_s, " is not valid; expected 0 .. 86400 seconds");
  o.budget_s = d.budget_s < 0 ? 45 : d.budget_s;
  o.eval_every = d.eval_every > 0 ? d.eval_every : (c.quick ? 4 : 10);
  EXDYNA_CHECK_ARG(d.seeds >= 1 && d.seeds <= 100, "--seeds ", d.seeds,
                   " is not valid; expected 1 .. 100");
  o.seeds = d.seeds;
  o.script_args = d.script_args;
  o.delay_us = eval::parse_delay_us(c.delay, "--delay");
  EXDYNA_CHECK_ARG(c.timeout_s > 0, "--timeout ", c.timeout_s, " is not valid; expected > 0");
  o.timeout_s = c.timeout_s;
  o.out_dir = c.out;
  return o;
}

// The report: examples/ddp_hooks_report.py over the output directory.
int report(const CompareDdpArgs& d, const CompareCommon& c, const std::string& python) {
  const auto script = source_file(d.report_script, "ddp_hooks_report.py", "--ddp-report-script");
  eval::RankCommand rc;
  rc.argv = {"/usr/bin/env", python,    script,      "--out",       c.out,
             "--gnuplot",    c.gnuplot, "--command", c.command_line};
  const auto log = fs::path(c.out) / "report-log";
  const auto r = eval::run_ranks({rc}, log, std::chrono::minutes(5));
  std::cout << eval::file_tail(log / "rank0.out", 40);
  if (!r.ok) {
    std::cerr << "exdyna: compare --ddp: the report failed (" << r.why << "):\n" << r.stderr_tail;
    return 1;
  }
  return 0;
}

}  // namespace

void add_compare_ddp_options(CLI::App* sub, CompareDdpArgs& d) {
  const char* g = "DDP head-to-head (--ddp)";
  sub->add_flag("--ddp", d.ddp,
                "the DDP head-to-head instead: PyTorch DDP with its hooks and exdyna's, one "
                "torchrun node per emulated host (docs/compare.md)")
      ->group(g);
  sub->add_option("--ddp-models", d.models,
                  "cnn (Fashion-MNIST), resnet18 (ResNet-18 on the same images), lstm "
                  "(python-doc word LM), transformer (a decoder-only LM on the same words); "
                  "resnet18 and transformer are not in the default run")
      ->delimiter(',')
      ->group(g);
  sub->add_option("--ddp-hooks", d.hooks,
                  "allreduce, fp16, bf16, powersgd-rN, exdyna-dX, exdyna-sync-dX (default: all "
                  "of the head-to-head); hsdp (FSDP2 hybrid sharding, native) and "
                  "hsdp-exdyna-dX (exdyna.fsdp on the replicate dimension) with "
                  "--ddp-ranks-per-host 2 or more and --ddp-models transformer")
      ->delimiter(',')
      ->group(g);
  sub->add_option("--ddp-ranks-per-host", d.ranks_per_host,
                  "ranks per emulated host (torchrun --nproc_per_node; default 1): they talk over "
                  "the host's loopback, the hosts over the shaped links; HSDP shards over a "
                  "host's ranks and replicates across the hosts")
      ->group(g);
  sub->add_option("--ddp-device", d.device,
                  "cpu (default) or cuda: every rank's model and DDP buckets on the GPU, still "
                  "over Gloo, so ranks may share one GPU (NCCL refuses that); exdyna's hooks then "
                  "need a package built with the GPU path")
      ->group(g);
  sub->add_option("--python", d.python,
                  "interpreter with torch and exdyna for the ranks (default: the first of the "
                  "active venv's, the one the build found and python3 that imports both)")
      ->group(g);
  sub->add_option("--ddp-script", d.script, "the training script (examples/ddp_hooks.py)")
      ->group(g);
  sub->add_option("--ddp-report-script", d.report_script,
                  "the report script (examples/ddp_hooks_report.py)")
      ->group(g);
  sub->add_option("--ddp-steps", d.steps,
                  "training steps per run (default cnn and resnet18 200, lstm and transformer "
                  "100; --quick 12)")
      ->group(g);
  sub->add_option("--ddp-budget", d.budget_s,
                  "seconds of training after which a run stops at its next evaluation, so the "
                  "dense hooks on a slow link end too (default 45; 0: every step)")
      ->group(g);
  sub->add_option("--ddp-eval-every", d.eval_every, "steps between evaluations (10; --quick 4)")
      ->group(g);
  sub->add_option("--seeds", d.seeds,
                  "runs of every setting, with the script's --seed 0 .. N-1: the report gives "
                  "each measure's mean and spread (default 1)")
      ->group(g);
  sub->add_option("--ddp-script-args", d.script_args,
                  "more arguments for every run's script, comma-separated (e.g. --vocab,2000)")
      ->delimiter(',')
      ->group(g);
}

int run_compare_ddp(const CompareDdpArgs& d, const CompareCommon& c) {
  if (c.report_only) return report(d, c, pick_python(d.python));
  const auto o = ddp_options(d, c);
  const auto why = eval::netns_unavailable_reason();
  if (!why.empty()) {
    std::cerr << "exdyna: compare --ddp: " << why << " (the runs need emulated hosts)\n";
    return 2;
  }
  const int stale = eval::remove_stale_sets();
  if (stale > 0) say("removed " + std::to_string(stale) + " namespaces left by a killed run");
  say(detail::concat(
      "compare --ddp: ",
      o.models.size() * o.hooks.size() * o.workers.size() * o.bandwidths.size() * o.seeds,
      " runs into ", c.out));
  const auto res = eval::run_ddp_matrix(o, say);
  say(detail::concat("ddp matrix: ", res.ran, " runs, ", res.kept, " kept, ", res.failed,
                     " failed in ", static_cast<int>(res.wall_s), " s"));
  const int rc = report(d, c, o.python);
  // A failed hook is a row of the report, not an error of the comparison; no run at all is.
  // kept: runs finished by an earlier invocation into the same directory.
  if (res.ran > 0 && res.ran - res.failed + res.kept == 0) {
    std::cerr << "exdyna: compare --ddp: none of the " << res.ran
              << " runs trained (their logs: " << c.out << "/launches)\n";
    return 1;
  }
  return rc;
}

}  // namespace exdyna::apps
