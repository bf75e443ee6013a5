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
  return {"allreduce",   "fp16",         "bf16",          "powersgd-r1",
          "powersgd-r4", "exdyna-d0.01", "exdyna-d0.001", "exdyna-sync-d0.01"};
}

void check_ddp_model(const std::string& model) {
  EXDYNA_CHECK_ARG(model == "cnn" || model == "lstm", "--ddp-models: '", model,
                   "' is not a model; expected cnn or lstm");
}

void check_ddp_hook(const std::string& hook) {
  static const std::regex ok(
      "allreduce|fp16|bf16|powersgd-r[1-9][0-9]*|exdyna(-sync)?-d(0?\\.[0-9]*[1-9][0-9]*|1)");
  EXDYNA_CHECK_ARG(std::regex_match(hook, ok), "--ddp-hooks: '", hook,
                   "' is not a hook; expected allreduce, fp16, bf16, powersgd-rN (N >= 1), "
                   "exdyna-dX or exdyna-sync-dX (0 < X <= 1)");
}

std::string ddp_run_name(const std::string& model, const std::string& hook, int workers,
                         std::uint64_t bps) {
  return model + "-" + hook + "-w" + std::to_string(workers) + "-b" + rate_name(bps);
}

std::string ddp_failure_line(const std::string& stderr_text) {
  // An exception's last line ("RuntimeError: ..."), gloo's enforce, a SystemExit message; not
  // torchrun's own summary of the failure, which names no cause.
  static const std::regex error(
      "^(\\S*(Error|Exception|EnforceNotMet)\\b.*|.*ddp_hooks\\.py: .*|.*gloo::\\S+.*)$");
  std::istringstream in(stderr_text);
  std::string first, last;
  for (std::string l; std::getline(in, l);) {
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

// Rank i's torchrun node inside host i.
RankCommand node_command(const DdpOptions& o, const HostSet& hosts, int node,
                         const std::string& model, const std::string& hook, int port,
                         const fs::path& dir) {
  RankCommand rc;
  rc.argv = hosts.exec_prefix(node);
  const int w = hosts.size();
  // --redirects/--tee name a local rank that does not exist: torch 1.13's torchrun under Python
  // 3.11 cannot parse its default "0" (an enum lookup that returns None), a mapping it can.
  rc.argv.insert(rc.argv.end(), {o.python,
                                 "-m",
                                 "torch.distributed.run",
                                 "--redirects",
                                 "9:1",
                                 "--tee",
                                 "9:1",
                                 "--nnodes",
                                 std::to_string(w),
                                 "--node_rank",
                                 std::to_string(node),
                                 "--nproc_per_node",
                                 "1",
                                 "--master_addr",
                                 hosts.address(0),
                                 "--master_port",
                                 std::to_string(port),
                                 fs::absolute(o.script).string(),
                                 "--model",
                                 model,
                                 "--hook",
                                 hook,
                                 "--steps",
                                 std::to_string(model == "cnn" ? o.steps_cnn : o.steps_lstm),
                                 "--eval-every",
                                 std::to_string(o.eval_every),
                                 "--csv",
                                 (dir / "steps.csv").string(),
                                 "--cache-dir",
                                 fs::absolute(o.out_dir).string(),
                                 "--timeout",
                                 std::to_string(collective_timeout_s(o))});
  rc.argv.insert(rc.argv.end(), o.script_args.begin(), o.script_args.end());
  // Gloo binds to the address the host name resolves to (loopback inside a namespace) unless told
  // the host's link.
  rc.env = {{"OMP_NUM_THREADS", "1"},
            {"PYTHONUNBUFFERED", "1"},
            {"GLOO_SOCKET_IFNAME", "eth0"},
            {"TP_SOCKET_IFNAME", "eth0"}};
  return rc;
}

// One run: W torchrun nodes; its status.txt says how it ended.
bool run_one(const DdpOptions& o, const HostSet& hosts, const std::string& model,
             const std::string& hook, int port, const fs::path& dir, std::string* why) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<RankCommand> nodes;
  std::string commands;
  for (int i = 0; i < hosts.size(); ++i) {
    nodes.push_back(node_command(o, hosts, i, model, hook, port, dir));
    for (const auto& a : nodes.back().argv) commands += a + " ";
    commands += "\n";
  }
  core::write_file_atomic(dir / "commands.txt", commands);
  const auto deadline = std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000));
  const auto r = run_ranks(nodes, dir, deadline, std::chrono::seconds(20));
  if (r.ok) {
    core::write_file_atomic(dir / "status.txt", "ok\n");
    return true;
  }
  std::ifstream in(dir / ("rank" + std::to_string(r.failed_rank) + ".err"));
  std::stringstream err;
  err << in.rdbuf();
  const auto line = ddp_failure_line(err.str());
  *why = detail::concat("node ", r.failed_rank, " ", r.why, (line.empty() ? "" : ": "), line);
  core::write_file_atomic(dir / "status.txt", "failed: " + *why + "\n");
  return false;
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
      for (const auto& model : o.models)
        for (const auto& hook : o.hooks) {
          const auto name = ddp_run_name(model, hook, w, bps);
          const auto dir = o.out_dir / "runs" / name;
          if (run_done(dir)) {
            ++res.kept;
            continue;
          }
          if (!hosts) hosts = std::make_unique<HostSet>(w, LinkShape{bps, o.delay_us, 0});
          // A fresh port per run: the last run's sockets may linger in TIME_WAIT on host 0.
          port = port >= 29999 ? 29600 : port + 1;
          const auto t = std::chrono::steady_clock::now();
          std::string why;
          const bool ok = run_one(o, *hosts, model, hook, port, dir, &why);
          ++res.ran;
          const double s =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
          progress(detail::concat("  ", name, ": ", ok ? "ok" : "FAILED (" + why + ")", " in ",
                                  static_cast<int>(s), " s"));
          if (!ok) ++res.failed, res.failures.push_back(name + ": " + why);
        }
    }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace exdyna::eval
