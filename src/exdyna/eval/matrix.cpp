#include "exdyna/eval/matrix.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/comm/job_token.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/eval/cell_cpu.hpp"
#include "exdyna/eval/hosts.hpp"
#include "exdyna/eval/measurements.hpp"
#include "exdyna/eval/rank_launch.hpp"
#include "exdyna/sim/simulate.hpp"
#include "exdyna/sim/trace_source.hpp"
#include "exdyna/sparsifiers/registry.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%g", v);
  return b;
}

std::string full(double v) {
  if (std::isnan(v)) return "nan";
  char b[64];
  std::snprintf(b, sizeof(b), "%.10g", v);
  return b;
}

std::string hms(double s) {
  const long t = std::lround(std::max(0.0, s));
  char b[32];
  std::snprintf(b, sizeof(b), "%ldm%02lds", t / 60, t % 60);
  return b;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(line);
  while (std::getline(is, cur, ',')) out.push_back(cur);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

double to_double(const std::string& s) {
  if (s == "nan" || s == "-nan" || s.empty()) return std::nan("");
  return std::stod(s);
}

// The per-rank message sizes a setting's cells can need: the dense all-reduce, the largest
// gathered index list (with room for padding), CLT-k's broadcast.
struct SweepSizes {
  std::uint64_t allreduce = 0, allgather = 0, broadcast = 0, alltoall = 0;
};

// The largest 4 KiB * 4^j not above `need` (at least 4 KiB; sizes beyond are extrapolated).
std::uint64_t sweep_top(double need, std::uint64_t cap) {
  std::uint64_t s = 4096;
  while (s * 4 <= need && s * 4 <= cap) s *= 4;
  return s;
}

std::int64_t gradient_length(const MatrixOptions& o) {
  return o.trace_dir.empty() ? o.n_grad : sim::read_trace_meta(o.trace_dir).n_g;
}

SweepSizes sweep_sizes(const MatrixOptions& o, int workers) {
  const double ng = static_cast<double>(gradient_length(o));
  const double dmax = *std::max_element(o.densities.begin(), o.densities.end());
  SweepSizes s;
  // Up to 64 MiB: the dense all-reduce of a ResNet-50-sized gradient (102 MB) is extrapolated
  // from the last two sizes, and its slope differs between 4-16 and 16-64 MiB on these links.
  s.allreduce = sweep_top(ng * 4, 64u << 20);
  // bench's all-gather size is the gathered payload; padding can double a worker's list.
  s.allgather = sweep_top(std::max(4096.0, 4 * workers * ng * dmax * 4 * 2), 16u << 20);
  s.broadcast = sweep_top(std::max(4096.0, 4 * ng * dmax * 4), 16u << 20);
  // Ok-Topk's all-to-all: about k records of 8 bytes per rank, up to twice that.
  s.alltoall = sweep_top(std::max(4096.0, 4 * ng * dmax * 8 * 2), 16u << 20);
  return s;
}

// The collectives the labels' cells make (a sweep of the others would cost time for nothing):
// every sparse label all-gathers counts and lists and all-reduces values, dense all-reduces, CLT-k
// broadcasts, Ok-Topk exchanges all-to-all.
std::vector<std::string> sweep_ops(const MatrixOptions& o) {
  std::vector<std::string> ops{"allreduce", "allgather-padded", "allgather-exact"};
  bool bcast = false, a2a = false;
  for (const auto& l : o.labels) {
    const auto sp = variant_for(l).sparsifier;
    bcast = bcast || sp == "cltk";
    a2a = a2a || sp == "oktopk";
  }
  if (bcast) ops.push_back("broadcast");
  if (a2a) ops.push_back("alltoall");
  return ops;
}

// The first columns of a comm.csv row; rows_of finds a setting's rows by its first two.
std::string row_head(int w, std::uint64_t bps, double delay_us) {
  return std::to_string(w) + "," + std::to_string(bps) + "," + num(delay_us);
}
std::string setting_key(int w, std::uint64_t bps) {
  return std::to_string(w) + "," + std::to_string(bps);
}

// Runs W ranks of `args` (argv after the binary) inside the hosts, or one process of it with the
// model network; rank_args(r) is appended to rank r's.
RanksResult run_job(const MatrixOptions& o, const HostSet* hosts, int workers,
                    const std::vector<std::string>& args,
                    const std::function<std::vector<std::string>(int)>& rank_args,
                    const fs::path& log_dir, std::vector<std::string>& commands,
                    const std::string& gloo_log_below = "") {
  std::vector<RankCommand> ranks;
  const int n = hosts ? workers : 1;
  const std::string token = comm::generate_job_token();  // closes each job's store to strangers
  for (int r = 0; r < n; ++r) {
    RankCommand rc;
    if (hosts) rc.argv = hosts->exec_prefix(r);
    rc.argv.push_back(fs::absolute(o.exdyna).string());
    rc.argv.insert(rc.argv.end(), args.begin(), args.end());
    if (hosts) {
      rc.argv.insert(rc.argv.end(), {"--backend", "gloo", "--listen", hosts->address(r)});
      rc.env = {{"MASTER_ADDR", hosts->address(0)},
                {"MASTER_PORT", "29500"},
                {"RANK", std::to_string(r)},
                {"WORLD_SIZE", std::to_string(workers)},
                {"LOCAL_RANK", "0"},
                {"LOCAL_WORLD_SIZE", "1"},
                {"OMP_NUM_THREADS", "1"},
                {"OPENBLAS_NUM_THREADS", "1"},
                {"EXDYNA_JOB_TOKEN", token}};
      if (!gloo_log_below.empty()) rc.env.emplace_back("EXDYNA_GLOO_LOG_BELOW", gloo_log_below);
    } else {
      rc.argv.insert(rc.argv.end(), {"--backend", "local", "--workers", std::to_string(workers)});
    }
    if (rank_args) {
      const auto extra = rank_args(r);
      rc.argv.insert(rc.argv.end(), extra.begin(), extra.end());
    }
    std::string line;
    for (const auto& [k, v] : rc.env)  // the secret stays out of the report
      if (k != "EXDYNA_JOB_TOKEN") line += k + "=" + v + " ";
    for (const auto& a : rc.argv) line += a + " ";
    line.pop_back();
    commands.push_back(line);
    ranks.push_back(std::move(rc));
  }
  // Generous: a collective may block for timeout_s; the whole job gets a few of those.
  const auto deadline = std::chrono::milliseconds(static_cast<long>(o.timeout_s * 3000 + 60000));
  return run_ranks(ranks, log_dir, deadline);
}

// ---- the collective sweep -----------------------------------------------------------------------

// `bench comm` rows of rank 0's output as comm.csv rows (bytes per rank).
std::vector<std::string> bench_rows(const fs::path& out, int w, std::uint64_t bps, double delay) {
  std::ifstream in(out);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    std::istringstream is(line);
    double size = 0, count = 0, us = 0;
    std::string op, algbw, busbw, wrong, algorithm;
    if (line.empty() || line[0] == '#' || !(is >> size >> count >> op >> us)) continue;
    // The algorithm the engine ran (the last column; "-" or absent: an operation without a choice).
    if (!(is >> algbw >> busbw >> wrong >> algorithm) || algorithm == "-") algorithm = "ring";
    const bool gather = op.rfind("allgather", 0) == 0;
    const double per_rank = gather ? size / w : size;
    rows.push_back(row_head(w, bps, delay) + "," + op + "," + full(per_rank) + "," +
                   full(us * 1e-6) + "," + algorithm);
  }
  return rows;
}

// The algorithm switch a `bench comm` job measured at start-up, from its header ("# auto: log2 W
// rounds below A B (all-reduce), G B (all-gather)...") as "A,G"; empty where it has none.
std::string measured_switch(const fs::path& out) {
  std::ifstream in(out);
  const std::string head = "# auto: log2 W rounds below ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(head, 0) != 0) continue;
    long long a = -1, g = -1;
    if (std::sscanf(line.c_str() + head.size(), "%lld B (all-reduce), %lld B", &a, &g) == 2 &&
        a >= 0 && g >= 0)
      return comm::Communicator::AlgorithmSwitch{a, g}.setting();
  }
  return "";
}

// One `bench comm` job of `ops` from `lo` to `hi` bytes over the hosts; its comm.csv rows.
std::vector<std::string> sweep_job(const MatrixOptions& o, const HostSet& hosts, int w,
                                   std::uint64_t bps, const std::vector<std::string>& ops,
                                   std::uint64_t lo, std::uint64_t hi, const fs::path& log_root) {
  std::vector<std::string> args{"bench",
                                "comm",
                                "--timeout",
                                num(o.timeout_s),
                                "-b",
                                std::to_string(lo),
                                "-e",
                                std::to_string(hi),
                                "-f",
                                "4",
                                "-n",
                                std::to_string(o.sweep_iters),
                                "--iters-small",
                                std::to_string(o.sweep_small_iters),
                                "-w",
                                "1",
                                "--balanced",
                                "--stat",
                                "median"};
  for (const auto& op : ops) args.insert(args.end(), {"--op", op});
  std::vector<std::string> cmds;
  const auto r = run_job(o, &hosts, w, args, nullptr, log_root, cmds);
  EXDYNA_CHECK_T(CommError, r.ok, "collective sweep at ", w, " hosts, ", rate_name(bps), ": rank ",
                 r.failed_rank, " failed (", r.why, "): ", r.stderr_tail);
  return bench_rows(log_root / "rank0.out", w, bps, hosts.applied_delay_us());
}

std::vector<std::string> run_sweep(const MatrixOptions& o, const HostSet& hosts, int w,
                                   std::uint64_t bps, const fs::path& log_root) {
  // One bench job for every operation up to 16 MiB (a job's start-up costs seconds at 8 ranks on
  // 2 cores); the all-reduce's larger sizes (to 64 MiB, for the dense all-reduce) in a second
  // job of its own, since bench runs every operation at every size. Beyond: extrapolated.
  const auto sizes = sweep_sizes(o, w);
  const std::uint64_t top = std::max({sizes.allgather, sizes.broadcast, sizes.alltoall,
                                      std::min<std::uint64_t>(sizes.allreduce, 16u << 20)});
  auto rows = sweep_job(o, hosts, w, bps, sweep_ops(o), 4096, top, log_root);
  if (sizes.allreduce > top) {
    const auto more =
        sweep_job(o, hosts, w, bps, {"allreduce"}, top * 4, sizes.allreduce, log_root / "large");
    rows.insert(rows.end(), more.begin(), more.end());
  }
  return rows;
}

// The rows of the model network (no hosts), at the same sizes a sweep would measure.
std::vector<std::string> model_rows(const MatrixOptions& o, int w, std::uint64_t bps) {
  const auto sizes = sweep_sizes(o, w);
  std::vector<std::string> rows;
  for (const std::string& op : sweep_ops(o)) {
    const std::uint64_t top = op == "allreduce"   ? sizes.allreduce
                              : op == "broadcast" ? sizes.broadcast
                              : op == "alltoall"  ? sizes.alltoall
                                                  : sizes.allgather;
    for (std::uint64_t s = 4096; s <= top; s *= 4) {
      const double per_rank = op.rfind("allgather", 0) == 0 ? double(s) / w : double(s);
      rows.push_back(row_head(w, bps, o.delay_us) + "," + op + "," + full(per_rank) + "," +
                     full(model_collective_s(op, w, bps, o.delay_us, per_rank)) + ",ring");
    }
  }
  return rows;
}

// comm.csv: the header, then rows keyed by setting; a sweep replaces its setting's rows.
const char* kCommHeader = "workers,bandwidth_bps,delay_us,op,bytes,time_s,algorithm";

// A comm.csv written before the algorithm column took the ring everywhere: its rows get ",ring".
std::vector<std::string> read_comm_rows(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.rfind("workers,", 0) == 0) continue;
    rows.push_back(split(line).size() == 6 ? line + ",ring" : line);
  }
  return rows;
}

std::vector<std::string> rows_of(const std::vector<std::string>& rows, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (r.rfind(key + ",", 0) == 0) out.push_back(r);
  return out;
}

CommTable table_of(const std::vector<std::string>& rows) {
  CommTable t;
  for (const auto& r : rows) {
    const auto f = split(r);
    if (f.size() == 7) t.add(f[3], to_double(f[4]), to_double(f[5]));
  }
  return t;
}

}  // namespace

int warmup_for(const MatrixOptions& o, const CellSpec& c) {
  if (o.warmup >= 0) return o.warmup;
  const bool rotates = c.variant.sparsifier == "exdyna" || c.variant.sparsifier == "cltk";
  return rotates ? std::max(c.workers + 1, 3) : 2;
}

namespace {

// ---- one cell ---------------------------------------------------------------------------------

bool gathers_exact(const MatrixOptions& o, const Variant& v) {
  auto exact_in = [](const std::vector<std::string>& a) {
    for (std::size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == "--gather" && a[i + 1] == "exact") return true;
    return std::find(a.begin(), a.end(), "--gather=exact") != a.end();
  };
  return exact_in(v.args) || exact_in(extra_args_for(o.extra_simulate_args, v));
}

// The cells.csv row of a cell from its statistics and the setting's collective times.
json cell_row(const MatrixOptions& o, const CellSpec& c, const std::vector<StatsColumns>& ranks,
              const CommTable& t) {
  const StatsColumns& s = ranks.front();
  const double w = c.workers;
  const std::string gather_op =
      gathers_exact(o, c.variant) ? "allgather-exact" : "allgather-padded";
  double ag = 0, ar = 0, bc = 0;
  const auto fused_col = s.col.find("fused");  // (statistics from before the column: none)
  for (std::size_t i = 0; i < s.rows; ++i) {
    const double counts = s.col.at("bytes_allgather_counts")[i];
    const double idx = s.col.at("bytes_allgather_indices")[i];
    if (fused_col != s.col.end() && fused_col->second[i] > 0)
      ag += t.time_s("allgather-exact", (counts + idx) / w);  // one all-gather of equal slots
    else
      ag += (counts > 0 ? t.time_s("allgather-exact", counts / w) : 0) +
            (idx > 0 ? t.time_s(gather_op, idx / w) : 0);
    ar += t.time_s("allreduce", s.col.at("bytes_allreduce")[i]);
    // Ok-Topk's all-to-alls: bytes_alltoall is what a rank sends to the others; the sweep's size
    // is what it sends in all, its own list included.
    const double a2a = s.col.at("bytes_alltoall")[i];
    if (a2a > 0 && w > 1) ar += t.time_s("alltoall", a2a * w / (w - 1));
    bc += t.time_s("broadcast", s.col.at("bytes_broadcast")[i]);
  }
  const double n = static_cast<double>(s.rows);
  ag = 1e3 * ag / n, ar = 1e3 * ar / n, bc = 1e3 * bc / n;
  const IterationCpu mid = median_iteration(ranks);
  const double cpu = 1e3 * mid.non_comm_s, select = 1e3 * mid.select_s;
  const std::size_t best = mid.row;
  const double wall_non_comm = 1e3 * s.mean("t_non_comm");
  json j;
  j["sparsifier"] = c.variant.sparsifier;
  j["label"] = c.variant.label;
  j["workers"] = c.workers;
  j["bandwidth_bps"] = c.bandwidth_bps;
  j["delay_us"] = o.delay_us;  // run_cell puts the delay the links really had
  j["density"] = c.density;
  j["n_g"] = static_cast<std::int64_t>(s.mean("n_g"));
  j["iterations"] = static_cast<std::int64_t>(s.rows);
  j["compute_ms"] = o.compute_ms;
  j["non_comm_ms"] = cpu;
  j["select_ms"] = select;
  j["ranks_measured"] = ranks.size();
  j["best_iteration"] = static_cast<std::int64_t>(s.col.at("iteration")[best]);
  j["allgather_ms"] = ag;
  j["allreduce_ms"] = ar;
  j["broadcast_ms"] = bc;
  j["comm_ms"] = ag + ar + bc;
  j["iter_ms"] = o.compute_ms + cpu + ag + ar + bc;
  j["bytes_per_iter"] = s.mean("bytes_total");
  j["density_ratio"] = s.mean("density") / s.mean("target_density");
  j["f_t"] = s.mean("f_t");
  // (Statistics written before the column existed have none.)
  j["collectives_per_iter"] = s.col.count("collectives") ? json(s.mean("collectives")) : json();
  j["fused_share"] = s.col.count("fused") ? json(s.mean("fused")) : json();
  const double ge = s.mean("global_error");
  j["global_error"] = std::isnan(ge) ? json(nullptr) : json(ge);
  // Kept for the reader, not used: wall times inflated by W ranks sharing the cores.
  j["comm_wall_ms"] = 1e3 * (s.mean("t_allgather") + s.mean("t_allreduce") + s.mean("t_broadcast"));
  j["non_comm_wall_ms"] = wall_non_comm;
  return j;
}

std::vector<std::string> simulate_args(const MatrixOptions& o, const CellSpec& c) {
  std::vector<std::string> a{"simulate",
                             "--sparsifier",
                             c.variant.sparsifier,
                             "--density",
                             num(c.variant.sparsifier == "dense" ? o.densities.front() : c.density),
                             "--iterations",
                             std::to_string(warmup_for(o, c) + o.iterations),
                             "--timeout",
                             num(o.timeout_s)};
  if (o.trace_dir.empty())
    a.insert(a.end(), {"--n-grad", std::to_string(o.n_grad)});
  else
    a.insert(a.end(), {"--trace", fs::absolute(o.trace_dir).string()});
  a.insert(a.end(), c.variant.args.begin(), c.variant.args.end());
  const auto extra = extra_args_for(o.extra_simulate_args, c.variant);
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// What a kept cell.json must match to be reused.
json cell_params(const MatrixOptions& o, const CellSpec& c) {
  json p;
  p["args"] = simulate_args(o, c);
  p["workers"] = c.workers;
  p["bandwidth_bps"] = c.bandwidth_bps;
  p["delay_us"] = o.delay_us;
  p["loss_pct"] = o.loss_pct;
  p["network"] = o.emulated ? "emulated" : "model";
  p["warmup"] = warmup_for(o, c);
  p["compute_ms"] = o.compute_ms;
  return p;
}

std::optional<json> read_cell(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  try {
    json j = json::parse(in);
    if (j.value("complete", false)) return j;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

bool cell_done(const MatrixOptions& o, const CellSpec& c) {
  const auto j = read_cell(o.out_dir / "cells" / c.name() / "cell.json");
  return j && j->contains("params") && (*j)["params"] == cell_params(o, c);
}

// Runs one cell; returns its iteration time (ms). Throws Error when a rank fails.
// Runs one cell; returns its iteration time (ms). Throws Error when a rank fails. With `shared`
// (the same variant, W and d at another bandwidth, already finished) the simulate run is not
// repeated: the non-communication CPU time and the bytes of each collective do not depend on the
// link, so that cell's statistics are reused with this setting's collective times.
double run_cell(const MatrixOptions& o, const HostSet* hosts, const CellSpec& c,
                const CommTable& table, const std::optional<CellSpec>& shared) {
  const fs::path dir = o.out_dir / "cells" / c.name();
  fs::create_directories(dir);
  fs::remove(dir / "cell.json");
  json row;
  if (shared) {
    const fs::path from = o.out_dir / "cells" / shared->name();
    for (const char* f : {"stats.csv", "decisions.csv"})
      fs::copy_file(from / f, dir / f, fs::copy_options::overwrite_existing);
    const auto src = read_cell(from / "cell.json");
    EXDYNA_CHECK(src.has_value(), "cell ", shared->name(), " has no complete cell.json");
    row = cell_row(o, c, read_run_stats(from, c.workers, warmup_for(o, c)), table);
    row["commands"] = (*src)["commands"];
    row["stats_from"] = shared->name();
    row["wall_s"] = 0.0;
  } else {
    std::vector<std::string> commands;
    const auto r = run_job(
        o, hosts, c.workers, simulate_args(o, c),
        [&](int r) -> std::vector<std::string> {
          if (r > 0) return {"--stats", (dir / "logs" / "stats-r{rank}.csv").string()};
          return {"--stats", (dir / "stats.csv").string(), "--decisions",
                  (dir / "decisions.csv").string()};
        },
        dir / "logs", commands, table.gloo_log_below);
    EXDYNA_CHECK(r.ok, "rank ", r.failed_rank, " failed (", r.why, ")",
                 r.stderr_tail.empty() ? "" : ":\n", r.stderr_tail);
    row = cell_row(o, c, read_run_stats(dir, c.workers, warmup_for(o, c)), table);
    row["commands"] = commands;
    row["wall_s"] = r.wall_s;
  }
  row["params"] = cell_params(o, c);
  row["network"] = o.emulated ? "emulated" : "model";
  row["netem"] = hosts ? hosts->netem() : false;
  // The delay the links had (0 where sch_netem is missing and tbf shapes the rate alone), as in
  // comm.csv; the one asked for is kept beside it.
  row["delay_us"] = hosts ? hosts->applied_delay_us() : o.delay_us;
  row["delay_requested_us"] = o.delay_us;
  row["complete"] = true;
  sim::write_file_atomic(dir / "cell.json", row.dump(2) + "\n");
  return row["iter_ms"].get<double>();
}

std::string csv_field(const json& v) {
  if (v.is_null()) return "nan";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  return full(v.get<double>());
}

}  // namespace

const std::vector<std::string>& default_labels() {
  static const std::vector<std::string> l = {"dense", "topk",   "cltk",         "hard-threshold",
                                             "sidco", "oktopk", "exdyna-paper", "exdyna-exact"};
  return l;
}

std::vector<std::string> extra_args_for(const std::vector<ExtraArgs>& extra, const Variant& v) {
  std::vector<std::string> out;
  for (const auto& e : extra)
    if (e.sparsifier.empty() || e.sparsifier == v.sparsifier)
      out.insert(out.end(), e.args.begin(), e.args.end());
  return out;
}

Variant variant_for(const std::string& label) {
  if (label == "exdyna-paper")
    return {label, "exdyna", {"--controller", "paper", "--balance", "paper"}};
  if (label == "exdyna-exact")
    return {
        label, "exdyna", {"--controller", "exact", "--balance", "exact", "--worker-cap", "auto"}};
  // Not in the default matrix: the exact controller with the paper's balance, which keeps every
  // partition's size bounded (exact balance can give one worker half the gradient to scan).
  if (label == "exdyna-exact-paper-balance")
    return {
        label, "exdyna", {"--controller", "exact", "--balance", "paper", "--worker-cap", "auto"}};
  // Any registered sparsifier runs under its own name, so a new one needs no change here.
  const auto names = sparsifiers::builtin_registry().names();
  if (std::find(names.begin(), names.end(), label) != names.end()) return {label, label, {}};
  throw InvalidArgument(
      detail::concat("--sparsifiers: '", label, "' is not a known sparsifier; expected one of ",
                     sparsifiers::builtin_registry().names_text(),
                     ", exdyna-paper, exdyna-exact or exdyna-exact-paper-balance"));
}

std::string CellSpec::name() const {
  std::string n = variant.label + "-w" + std::to_string(workers) + "-b" + rate_name(bandwidth_bps);
  if (variant.sparsifier != "dense") n += "-d" + num(density);
  return n;
}

std::vector<CellSpec> plan_cells(const MatrixOptions& o) {
  std::vector<CellSpec> out;
  for (auto b : o.bandwidths)
    for (int w : o.workers)
      for (const auto& l : o.labels) {
        const Variant v = variant_for(l);
        if (v.sparsifier == "dense") {
          out.push_back({v, w, b, 1.0});
          continue;
        }
        for (double d : o.densities) out.push_back({v, w, b, d});
      }
  return out;
}

void CommTable::add(const std::string& op, double bytes, double time_s) {
  auto& p = points_[op];
  p[bytes] = time_s;
  kept_[op] = without_stalls(p);
}

double CommTable::time_s(const std::string& op, double bytes) const {
  if (bytes <= 0) return 0;
  const auto it = kept_.find(op);
  EXDYNA_CHECK_T(DataError, it != kept_.end() && !it->second.empty(), "comm.csv has no ", op,
                 " row for this setting");
  const auto& p = it->second;
  if (bytes <= p.begin()->first) return p.begin()->second;
  auto hi = p.lower_bound(bytes);
  if (hi == p.end()) --hi;  // extrapolate from the last two points
  if (hi == p.begin()) return hi->second * bytes / hi->first;
  auto lo = std::prev(hi);
  const double slope = (hi->second - lo->second) / (hi->first - lo->first);
  return std::max(0.0, lo->second + slope * (bytes - lo->first));
}

double model_collective_s(const std::string& op, int workers, std::uint64_t bps, double delay_us,
                          double bytes) {
  const double alpha = (delay_us + 20) * 1e-6;
  const double beta = 8.0 / static_cast<double>(bps);  // seconds per byte
  const double w = workers;
  if (workers <= 1) return 0;
  if (op == "allreduce") return 2 * (w - 1) * (alpha + bytes / w * beta);
  if (op == "broadcast") return std::ceil(std::log2(w)) * (alpha + bytes * beta);
  if (op == "alltoall") return (w - 1) * (alpha + bytes / w * beta);  // W - 1 rounds of bytes / W
  return (w - 1) * (alpha + bytes * beta);  // all-gather: every rank receives W-1 lists
}

const std::string& cells_csv_header() {
  static const std::string h =
      "sparsifier,label,workers,bandwidth_bps,delay_us,density,n_g,iterations,compute_ms,iter_ms,"
      "non_comm_ms,select_ms,comm_ms,allgather_ms,allreduce_ms,broadcast_ms,bytes_per_iter,density_"
      "ratio,f_t,global_error,collectives_per_iter,fused_share";
  return h;
}

int write_cells_csv(const fs::path& out_dir, const std::vector<CellSpec>& cells,
                    const std::vector<double>& densities) {
  std::vector<std::string> cols;
  {
    std::string c;
    std::istringstream is(cells_csv_header());
    while (std::getline(is, c, ',')) cols.push_back(c);
  }
  std::string s = cells_csv_header() + "\n";
  int rows = 0;
  for (const auto& c : cells) {
    const auto j = read_cell(out_dir / "cells" / c.name() / "cell.json");
    if (!j) continue;
    // Dense ran once per (W, B); its row stands beside every density's sparse rows.
    const std::vector<double> ds =
        c.variant.sparsifier == "dense" ? densities : std::vector<double>{c.density};
    for (double d : ds) {
      std::string line;
      for (const auto& col : cols) {
        if (!line.empty()) line += ',';
        line += col == "density" ? full(d) : csv_field(j->value(col, json(nullptr)));
      }
      s += line + "\n";
      ++rows;
    }
  }
  sim::write_file_atomic(out_dir / "cells.csv", s);
  return rows;
}

namespace {

// Replaces the setting's rows of out_dir/comm.csv with `rows`.
void store_comm_rows(const fs::path& out_dir, int w, std::uint64_t bps,
                     const std::vector<std::string>& rows) {
  const fs::path p = out_dir / "comm.csv";
  const std::string key = setting_key(w, bps) + ",";
  std::string s = std::string(kCommHeader) + "\n";
  for (const auto& r : read_comm_rows(p))
    if (r.rfind(key, 0) != 0) s += r + "\n";
  for (const auto& r : rows) s += r + "\n";
  sim::write_file_atomic(p, s);
}

// A kept cell's row derived again from its statistics and the stored sweep (comm.csv), so that a
// resumed run reads every cell with the current estimators; nothing is measured again. A cell
// whose setting has no sweep rows, or no complete cell.json, is left as it is.
void rederive_cell(const MatrixOptions& o, const CellSpec& c,
                   const std::vector<std::string>& comm_rows) {
  const fs::path dir = o.out_dir / "cells" / c.name();
  const auto old = read_cell(dir / "cell.json");
  const auto setting = rows_of(comm_rows, setting_key(c.workers, c.bandwidth_bps));
  if (!old || setting.empty()) return;
  const fs::path from = old->contains("stats_from")
                            ? o.out_dir / "cells" / (*old)["stats_from"].get<std::string>()
                            : dir;
  json derived =
      cell_row(o, c, read_run_stats(from, c.workers, warmup_for(o, c)), table_of(setting));
  derived.erase("delay_us");  // run_cell replaced it with the delay the links really had
  json row = *old;            // what the run recorded stays; what cell_row derives is replaced
  row.update(derived);
  if (row != *old) sim::write_file_atomic(dir / "cell.json", row.dump(2) + "\n");
}

// Sets up one network setting: hosts (emulated) and the collective times. Throws on failure.
CommTable prepare_setting(const MatrixOptions& o, int w, std::uint64_t bps,
                          std::unique_ptr<HostSet>& hosts, const MatrixProgress& progress) {
  std::vector<std::string> rows;
  std::string log_below;
  if (o.emulated) {
    hosts = std::make_unique<HostSet>(w, LinkShape{bps, o.delay_us, o.loss_pct});
    progress(detail::concat("network: ", w, " hosts (", hosts->prefix(), "*), ", rate_name(bps),
                            hosts->netem() ? ", delay " + num(o.delay_us) + " us"
                                           : ", tbf only (no sch_netem: no delay emulated)",
                            "; collective sweep ..."));
    const auto t0 = Clock::now();
    const fs::path sweep_dir = o.out_dir / "sweeps" / (std::to_string(w) + "-" + rate_name(bps));
    rows = run_sweep(o, *hosts, w, bps, sweep_dir);
    log_below = measured_switch(sweep_dir / "rank0.out");
    progress(detail::concat("  sweep done in ",
                            hms(std::chrono::duration<double>(Clock::now() - t0).count())));
  } else {
    rows = model_rows(o, w, bps);
  }
  store_comm_rows(o.out_dir, w, bps, rows);
  auto table = table_of(rows_of(rows, setting_key(w, bps)));
  table.gloo_log_below = log_below;
  return table;
}

}  // namespace

MatrixResult run_matrix(const MatrixOptions& o, const MatrixProgress& progress) {
  const auto t0 = Clock::now();
  fs::create_directories(o.out_dir / "cells");
  const auto cells = plan_cells(o);
  MatrixResult res;
  std::vector<bool> done(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) done[i] = cell_done(o, cells[i]);
  res.kept = static_cast<int>(std::count(done.begin(), done.end(), true));
  const int todo = static_cast<int>(cells.size()) - res.kept;
  // The ETA counts the cells that run simulate; those sharing another bandwidth's run are cheap.
  auto runs_simulate = [&](const CellSpec& c) {
    return !o.share_across_bandwidths || c.bandwidth_bps == o.bandwidths.front();
  };
  int heavy_left = 0, heavy_done = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) heavy_left += !done[i] && runs_simulate(cells[i]);
  if (res.kept > 0) {
    progress(
        detail::concat("resuming: ", res.kept, " of ", cells.size(),
                       " cells kept from an earlier run (derived again from their statistics)"));
    const auto comm_rows = read_comm_rows(o.out_dir / "comm.csv");
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (!done[i]) continue;
      try {
        rederive_cell(o, cells[i], comm_rows);
      } catch (const Error& e) {  // its statistics are unreadable: keep the row it has
        progress(detail::concat("  ", cells[i].name(), ": kept as it was (", e.what(), ")"));
      }
    }
  }
  write_cells_csv(o.out_dir, cells, o.densities);
  int finished = 0;
  for (auto b : o.bandwidths)
    for (int w : o.workers) {
      std::vector<std::size_t> mine;
      for (std::size_t i = 0; i < cells.size(); ++i)
        if (!done[i] && cells[i].workers == w && cells[i].bandwidth_bps == b) mine.push_back(i);
      if (mine.empty()) continue;
      std::unique_ptr<HostSet> hosts;
      CommTable table;
      std::string setting_error;
      try {
        table = prepare_setting(o, w, b, hosts, progress);
      } catch (const InvalidArgument&) {
        throw;
      } catch (const Error& e) {
        setting_error = e.what();
      }
      for (auto i : mine) {
        const auto& c = cells[i];
        const auto tc = Clock::now();
        std::string line;
        try {
          EXDYNA_CHECK(setting_error.empty(), setting_error);
          std::optional<CellSpec> shared;
          if (o.share_across_bandwidths && b != o.bandwidths.front()) {
            CellSpec first = c;
            first.bandwidth_bps = o.bandwidths.front();
            if (cell_done(o, first)) shared = first;
          }
          const double ms = run_cell(o, hosts.get(), c, table, shared);
          ++res.ran;
          line = detail::concat("iter ", full(ms), " ms");
        } catch (const InvalidArgument&) {
          throw;
        } catch (const Error& e) {
          ++res.failed;
          res.failures.push_back(c.name() + ": " + e.what());
          line = std::string("FAILED: ") + e.what();
        }
        ++finished;
        if (runs_simulate(c)) ++heavy_done, --heavy_left;
        write_cells_csv(o.out_dir, cells, o.densities);
        const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        const double eta = heavy_done > 0 ? elapsed / heavy_done * heavy_left : 0.0;
        char head[160];
        std::snprintf(head, sizeof(head), "[%3d/%d] %-34s %5.1f s  elapsed %s  ETA %s  ", finished,
                      todo, c.name().c_str(),
                      std::chrono::duration<double>(Clock::now() - tc).count(),
                      hms(elapsed).c_str(), hms(eta).c_str());
        progress(head + line);
      }
    }
  res.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

}  // namespace exdyna::eval
