#include "exdyna/eval/ddp_matrix.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>

#include "exdyna/core/atomic_file.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/eval/hosts.hpp"
#include "exdyna/eval/rank_launch.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;

std::vector<std::string> default_ddp_hooks() {
  return {"allreduce",   "fp16",         "bf16",         "powersgd-r1",
          "powersgd-r4", "exdyna-d0.01", "exdyna-d0.001"};
}

void check_ddp_model(const std::string& model) {
  EXDYNA_CHECK_ARG(is_image_model(model) || model == "lstm" || model == "transformer",
                   "--ddp-models: '", model,
                   "' is not a model; expected cnn, resnet18, lstm or transformer");
}

bool is_image_model(const std::string& model) {
  return model == "cnn" || model == "resnet18";
}

void check_ddp_device(const std::string& device) {
  EXDYNA_CHECK_ARG(device == "cpu" || device == "cuda", "--ddp-device '", device,
                   "' is not a device; expected cpu or cuda");
}

void check_ddp_hook(const std::string& hook) {
  static const std::regex ok(
      "allreduce|fp16|bf16|powersgd-r[1-9][0-9]*|hsdp|"
      "(exdyna(-sync)?|hsdp-exdyna)-d(0?\\.[0-9]*[1-9][0-9]*|1)");
  EXDYNA_CHECK_ARG(std::regex_match(hook, ok), "--ddp-hooks: '", hook,
                   "' is not a hook; expected allreduce, fp16, bf16, powersgd-rN (N >= 1), "
                   "exdyna-dX, exdyna-sync-dX, hsdp or hsdp-exdyna-dX (0 < X <= 1)");
}

bool is_hsdp_hook(const std::string& hook) {
  return hook == "hsdp" || hook.rfind("hsdp-", 0) == 0;
}

void check_hsdp_setting(const std::vector<std::string>& hooks,
                        const std::vector<std::string>& models, int ranks_per_host) {
  for (const auto& h : hooks) {
    if (!is_hsdp_hook(h)) continue;
    // One rank per host would leave HSDP no shard group: it would be DDP with more overhead.
    EXDYNA_CHECK_ARG(ranks_per_host >= 2, "--ddp-hooks ", h,
                     ": HSDP shards the model over a host's ranks; expected "
                     "--ddp-ranks-per-host 2 or more (it is ",
                     ranks_per_host, ")");
    // The script shards the transformer's blocks; the other models have no such units.
    for (const auto& m : models)
      EXDYNA_CHECK_ARG(m == "transformer", "--ddp-hooks ", h, ": HSDP runs on the transformer; ",
                       "expected --ddp-models transformer, not '", m, "'");
  }
}

std::string ddp_run_name(const std::string& model, const std::string& hook, int workers,
                         std::uint64_t bps, int seed, int ranks_per_host) {
  return model + "-" + hook + "-w" + std::to_string(workers) +
         (ranks_per_host > 1 ? "x" + std::to_string(ranks_per_host) : "") + "-b" + rate_name(bps) +
         (seed > 0 ? "-s" + std::to_string(seed) : "");
}

std::vector<std::string> torchrun_argv(const DdpOptions& o, int hosts, int node,
                                       const std::string& master_addr, int port) {
  // --redirects/--tee name a local rank that does not exist: torch 1.13's torchrun under Python
  // 3.11 cannot parse its default "0" (an enum lookup that returns None), a mapping it can.
  return {o.python,
          "-m",
          "torch.distributed.run",
          "--redirects",
          "9:1",
          "--tee",
          "9:1",
          "--nnodes",
          std::to_string(hosts),
          "--node_rank",
          std::to_string(node),
          "--nproc_per_node",
          std::to_string(o.ranks_per_host),
          "--master_addr",
          master_addr,
          "--master_port",
          std::to_string(port)};
}

std::string ddp_failure_line(const std::string& stderr_text) {
  // An exception's last line ("RuntimeError: ..."), gloo's enforce, a SystemExit message; not
  // torchrun's own summary of the failure, which names no cause. torch 2.x's torchrun prefixes a
  // worker's lines with "[rank<i>]: ".
  static const std::regex error(
      "^(\\S*(Error|Exception|EnforceNotMet)\\b.*|.*ddp_hooks\\.py: .*|.*gloo::\\S+.*)$");
  static const std::regex rank_prefix("^\\[rank[0-9]+\\]: ");
  std::istringstream in(stderr_text);
  std::string first, last;
  for (std::string l; std::getline(in, l);) {
    l = std::regex_replace(l, rank_prefix, "");
    if (l.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = l;
    if (!first.empty() || l.find("ChildFailedError") != std::string::npos) continue;
    if (std::regex_match(l, error)) first = l;
  }
  return first.empty() ? last : first;
}

namespace {

bool run_done(const fs::path& dir) {
  std::ifstream in(dir / "status.txt");
  std::string l;
  return std::getline(in, l) && l == "ok";
}

// A collective that blocks this long is a hang (a hook that deadlocks the group), reported as the
// run's failure well before the run's own deadline.
int collective_timeout_s(const DdpOptions& o) {
  return static_cast<int>(std::clamp(o.timeout_s / 4, 30.0, 120.0));
}

// One launch: the hooks left to run for a (workers, bandwidth, model) setting, in one process per
// host. Run i's CSV goes to run_dirs[i]/steps.csv.
struct Launch {
  std::string model;
  int seed = 0;
  std::vector<std::string> hooks;
  std::vector<fs::path> run_dirs;
};

// Rank i's torchrun node inside host i.
RankCommand node_command(const DdpOptions& o, const HostSet& hosts, int node, const Launch& l,
                         int port) {
  RankCommand rc;
  rc.argv = hosts.exec_prefix(node);
  const auto launcher = torchrun_argv(o, hosts.size(), node, hosts.address(0), port);
  rc.argv.insert(rc.argv.end(), launcher.begin(), launcher.end());
  rc.argv.insert(
      rc.argv.end(),
      {fs::absolute(o.script).string(), "--model", l.model, "--steps",
       std::to_string(is_image_model(l.model) ? o.steps_cnn : o.steps_lstm), "--device", o.device,
       "--seed", std::to_string(l.seed), "--eval-every", std::to_string(o.eval_every), "--budget",
       std::to_string(o.budget_s), "--cache-dir", fs::absolute(o.out_dir).string(), "--timeout",
       std::to_string(collective_timeout_s(o))});
  for (std::size_t i = 0; i < l.hooks.size(); ++i)
    rc.argv.insert(rc.argv.end(), {"--hook", l.hooks[i], "--csv",
                                   fs::absolute(l.run_dirs[i] / "steps.csv").string()});
  rc.argv.insert(rc.argv.end(), o.script_args.begin(), o.script_args.end());
  // Gloo binds to the address the host name resolves to (loopback inside a namespace) unless told
  // the host's link. The ranks of one host still reach each other over loopback: the kernel routes
  // a namespace's own address there, past eth0's shaping (HSDP's shard group is the fast link).
  rc.env = {{"OMP_NUM_THREADS", "1"},
            {"OPENBLAS_NUM_THREADS", "1"},
            {"PYTHONUNBUFFERED", "1"},
            {"GLOO_SOCKET_IFNAME", "eth0"},
            {"TP_SOCKET_IFNAME", "eth0"}};
  return rc;
}

// Runs the launch; returns how many of its hooks finished (their steps.csv exists, in order). A
// run that finished gets status "ok"; the first that did not gets "failed: <why>" and the
// launch's logs. The hooks after it are left to the next launch.
std::size_t run_launch(const DdpOptions& o, const HostSet& hosts, const Launch& l, int port,
                       const fs::path& log_dir, std::string* why) {
  fs::remove_all(log_dir);
  fs::create_directories(log_dir);
  for (const auto& d : l.run_dirs) fs::remove_all(d), fs::create_directories(d);
  std::vector<RankCommand> nodes;
  std::string commands;
  for (int i = 0; i < hosts.size(); ++i) {
    nodes.push_back(node_command(o, hosts, i, l, port));
    for (const auto& a : nodes.back().argv) commands += a + " ";
    commands += "\n";
  }
  core::write_file_atomic(log_dir / "commands.txt", commands);
  const auto deadline =
      std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000 * l.hooks.size()));
  const auto r = run_ranks(nodes, log_dir, deadline, std::chrono::seconds(20));
  std::size_t done = 0;
  while (done < l.hooks.size() && fs::exists(l.run_dirs[done] / "steps.csv")) {
    core::write_file_atomic(l.run_dirs[done] / "status.txt", "ok\n");
    ++done;
  }
  if (done == l.hooks.size()) return done;
  if (r.ok) {
    *why = "no steps.csv, though every node exited 0";
  } else {
    std::ifstream in(log_dir / ("rank" + std::to_string(r.failed_rank) + ".err"));
    std::stringstream err;
    err << in.rdbuf();
    const auto line = ddp_failure_line(err.str());
    *why = detail::concat("node ", r.failed_rank, " ", r.why, (line.empty() ? "" : ": "), line);
  }
  const auto& failed = l.run_dirs[done];
  for (const auto& e : fs::directory_iterator(log_dir))
    fs::copy_file(e.path(), failed / e.path().filename(), fs::copy_options::overwrite_existing);
  core::write_file_atomic(failed / "status.txt", "failed: " + *why + "\n");
  return done;
}

// Runs the launch's hooks in launches of the same setting until none is left: after a failed
// hook, the ones after it get a launch of their own.
void run_launches(const DdpOptions& o, const HostSet& hosts, Launch l, int* port,
                  DdpMatrixResult* res, const std::function<void(const std::string&)>& progress) {
  for (int attempt = 0; !l.hooks.empty(); ++attempt) {
    // A fresh port per launch: the last one's sockets may linger in TIME_WAIT on host 0.
    *port = *port >= 29999 ? 29600 : *port + 1;
    const auto t = std::chrono::steady_clock::now();
    const auto log_dir =
        o.out_dir / "launches" /
        detail::concat(l.model, "-w", hosts.size(),
                       o.ranks_per_host > 1 ? "x" + std::to_string(o.ranks_per_host) : "", "-b",
                       rate_name(hosts.link().rate_bps), "-s", l.seed, "-", attempt);
    std::string why;
    const auto done = run_launch(o, hosts, l, *port, log_dir, &why);
    const int s = static_cast<int>(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    for (std::size_t i = 0; i < done; ++i)
      progress(detail::concat("  ", l.run_dirs[i].filename().string(), ": ok"));
    const auto ended = std::min(done + 1, l.hooks.size());  // the finished ones and a failed one
    if (done < l.hooks.size()) {
      const auto name = l.run_dirs[done].filename().string();
      progress(detail::concat("  ", name, ": FAILED (", why, ")"));
      ++res->failed, res->failures.push_back(name + ": " + why);
    }
    progress(
        detail::concat("  (", ended, " of ", l.hooks.size(), " runs in one launch, ", s, " s)"));
    res->ran += static_cast<int>(ended);
    l.hooks.erase(l.hooks.begin(), l.hooks.begin() + static_cast<long>(ended));
    l.run_dirs.erase(l.run_dirs.begin(), l.run_dirs.begin() + static_cast<long>(ended));
  }
}

}  // namespace

DdpMatrixResult run_ddp_matrix(const DdpOptions& o,
                               const std::function<void(const std::string&)>& progress) {
  DdpMatrixResult res;
  const auto t0 = std::chrono::steady_clock::now();
  int port = 29600;
  for (const int w : o.workers)
    for (const auto bps : o.bandwidths) {
      std::unique_ptr<HostSet> hosts;  // made when a run of this setting is left to do
      for (int seed = 0; seed < o.seeds; ++seed)
        for (const auto& model : o.models) {
          Launch l{model, seed, {}, {}};
          for (const auto& hook : o.hooks) {
            const auto dir =
                o.out_dir / "runs" / ddp_run_name(model, hook, w, bps, seed, o.ranks_per_host);
            if (run_done(dir)) {
              ++res.kept;
              continue;
            }
            l.hooks.push_back(hook);
            l.run_dirs.push_back(dir);
          }
          if (l.hooks.empty()) continue;
          if (!hosts) hosts = std::make_unique<HostSet>(w, LinkShape{bps, o.delay_us, 0});
          run_launches(o, *hosts, std::move(l), &port, &res, progress);
        }
    }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace exdyna::eval
