// `exdyna bench comm`: a multi-rank benchmark of the collectives the sparsifiers use, in the style
// of nccl-tests: a size sweep, warm-up, then per size and operation the mean time per call
// (averaged over ranks), algbw and busbw, and with --check the number of wrong elements.
//
//   allreduce          float sum of `size` bytes;         busbw = algbw * 2(n-1)/n
//   allgather-padded   index lists of uneven lengths (worker r holds a share proportional to r+1,
//                      like imbalanced sparsifier counts), padded to the longest on the wire;
//   allgather-exact    the same lists, exact (no padding); for both: size = gathered payload,
//                      algbw = payload / time, busbw = algbw * (n-1)/n, so padding shows up as a
//                      lower bandwidth.
//   broadcast          float buffer of `size` bytes from rank 0;  busbw = algbw
//   alltoall           index lists of uneven lengths from every rank to every rank (rank r sends
//                      rank j a share proportional to (j - r) mod n + 1; Ok-Topk's sparse
//                      reduce-scatter); size = what one rank sends, its own list included,
//                      busbw = algbw * (n-1)/n
// The operations are one table (kOps: name, bus factor, set-up, run, check) behind one harness
// (time_op), as nccl-tests has one test per collective behind its common driver.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "exdyna/apps/cli_checks.hpp"
#include "exdyna/apps/commands.hpp"
#include "exdyna/apps/engine_cli.hpp"
#include "exdyna/comm/communicator_testing.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::apps {

namespace {

struct BenchCommOptions {
  EngineCli engine;
  std::string min_bytes = "4K";
  std::string max_bytes = "16M";
  int factor = 4;
  int iters = 20;
  // Timed calls per size below small_below (0: iters). The small sizes cost little and, with
  // ranks sharing cores, one call there is a scheduler's wake-up: their median wants more calls.
  int small_iters = 0;
  std::string small_below = "1M";
  int warmup = 3;
  bool check = false;
  bool balanced = false;
  // Per rank, the mean over the timed calls (one clock around them all, as nccl-tests) or the
  // median of the calls timed one by one (a call stalled by the scheduler does not count).
  std::string stat = "mean";
  std::vector<std::string> ops{"allreduce", "allgather-padded", "allgather-exact", "broadcast",
                               "alltoall"};
  // The sweep once per entry: auto (the engine's own switch), ring, log (log2 W rounds); an
  // engine without a choice of algorithm takes only auto.
  std::vector<std::string> algorithms{"auto"};
};

// Uneven per-rank element counts summing to total: rank r gets a share proportional to r + 1
// (balanced: equal shares); every rank at least 1 element.
std::vector<std::int64_t> rank_counts(std::int64_t total, int n, bool balanced) {
  std::vector<std::int64_t> c(static_cast<std::size_t>(n));
  const double denom = balanced ? n : n * (n + 1) / 2.0;
  std::int64_t sum = 0;
  for (int r = 0; r < n; ++r) {
    c[static_cast<std::size_t>(r)] = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(
               std::floor(static_cast<double>(total) * (balanced ? 1.0 : r + 1.0) / denom)));
    sum += c[static_cast<std::size_t>(r)];
  }
  c.back() = std::max<std::int64_t>(1, c.back() + total - sum);
  return c;
}

using Clock = std::chrono::steady_clock;

// What an operation is run on: the ranks, the element count of this row, and its buffers (kept
// across rows so a sweep allocates only when it grows).
struct OpRun {
  explicit OpRun(comm::Communicator& comm) : c(comm), n(comm.size()), r(comm.rank()) {}
  comm::Communicator& c;
  int n = 1, r = 0;
  std::int64_t count = 0;  // 4-byte elements: the row's size / 4
  bool balanced = false;
  std::vector<float> f;
  std::vector<std::uint32_t> mine, out;
  std::vector<std::int64_t> counts;  // all-gathers: every rank's list length; all-to-all: mine
  std::vector<std::int64_t> recv_counts;
};

// Rank r's value at position i in the float operations: small integers, exact in float sums.
float pattern(int r, std::size_t i) {
  return static_cast<float>((r + 1) * (static_cast<int>(i % 251) + 1));
}
// Rank q's j-th index in the all-gathers: the rank in the top byte, the position below.
std::uint32_t index_of(int q, std::int64_t j) {
  return (static_cast<std::uint32_t>(q) << 24) | (static_cast<std::uint32_t>(j) & 0xffffff);
}

// One row of the table of operations, as nccl-tests has one test per collective: busbw = algbw *
// bus_factor(n); setup fills the inputs for op.count; run is the call that is timed (repeated on
// its own output); check counts the wrong elements after one run from freshly set-up inputs,
// against a closed form.
struct BenchOp {
  const char* name;
  bool has_algorithms;  // an all-reduce or all-gather: the engine may choose its algorithm
  double (*bus_factor)(int n);
  void (*setup)(OpRun& op);
  void (*run)(OpRun& op);
  std::int64_t (*check)(const OpRun& op);
};

void setup_allreduce(OpRun& op) {
  op.f.resize(static_cast<std::size_t>(op.count));
  for (std::size_t i = 0; i < op.f.size(); ++i) op.f[i] = pattern(op.r, i);
}
std::int64_t check_allreduce(const OpRun& op) {
  std::int64_t wrong = 0;
  const float tri = static_cast<float>(op.n * (op.n + 1) / 2);
  for (std::size_t i = 0; i < op.f.size(); ++i)
    if (op.f[i] != tri * static_cast<float>(static_cast<int>(i % 251) + 1)) ++wrong;
  return wrong;
}

void setup_allgather(OpRun& op) {
  op.counts = rank_counts(op.count, op.n, op.balanced);
  op.mine.resize(static_cast<std::size_t>(op.counts[static_cast<std::size_t>(op.r)]));
  for (std::size_t j = 0; j < op.mine.size(); ++j)
    op.mine[j] = index_of(op.r, static_cast<std::int64_t>(j));
  std::fill(op.out.begin(), op.out.end(), 0xffffffffu);  // so a check sees what was not written
}
template <comm::GatherMode mode>
void run_allgather(OpRun& op) {
  op.c.allgather_list(std::span<const std::uint32_t>(op.mine), op.counts, mode, op.out);
}
std::int64_t check_allgather(const OpRun& op) {
  std::int64_t wrong = 0;
  std::size_t pos = 0;
  for (int q = 0; q < op.n; ++q)
    for (std::int64_t j = 0; j < op.counts[static_cast<std::size_t>(q)]; ++j, ++pos)
      if (pos >= op.out.size() || op.out[pos] != index_of(q, j)) ++wrong;
  if (op.out.size() != static_cast<std::size_t>(op.count))
    wrong += std::abs(static_cast<std::int64_t>(op.out.size()) - op.count);
  return wrong;
}

// Root 0 sends rank 0's pattern; the other ranks start from -1, which the pattern never holds.
void setup_broadcast(OpRun& op) {
  op.f.resize(static_cast<std::size_t>(op.count));
  for (std::size_t i = 0; i < op.f.size(); ++i) op.f[i] = op.r == 0 ? pattern(0, i) : -1.0f;
}
std::int64_t check_broadcast(const OpRun& op) {
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < op.f.size(); ++i)
    if (op.f[i] != pattern(0, i)) ++wrong;
  return wrong;
}

// Rank r's list for rank j is share (j - r) mod n of rank_counts: every rank sends the same total,
// and every pair a different length.
std::int64_t alltoall_count(const OpRun& op, int from, int to) {
  const auto shares = rank_counts(op.count, op.n, op.balanced);
  return shares[static_cast<std::size_t>(((to - from) % op.n + op.n) % op.n)];
}
void setup_alltoall(OpRun& op) {
  op.counts.resize(static_cast<std::size_t>(op.n));
  for (int j = 0; j < op.n; ++j)
    op.counts[static_cast<std::size_t>(j)] = alltoall_count(op, op.r, j);
  op.mine.resize(static_cast<std::size_t>(op.count));
  for (std::size_t p = 0; p < op.mine.size(); ++p)
    op.mine[p] = index_of(op.r, static_cast<std::int64_t>(p));
  std::fill(op.out.begin(), op.out.end(), 0xffffffffu);
}
void run_alltoall(OpRun& op) {
  op.c.alltoall_list(std::span<const std::uint32_t>(op.mine), op.counts, op.out, op.recv_counts);
}
// From rank q: its elements at the positions of its list for this rank, in order.
std::int64_t check_alltoall(const OpRun& op) {
  std::int64_t wrong = 0;
  std::size_t pos = 0;
  for (int q = 0; q < op.n; ++q) {
    std::int64_t first = 0;
    for (int j = 0; j < op.r; ++j) first += alltoall_count(op, q, j);
    const std::int64_t len = alltoall_count(op, q, op.r);
    if (op.recv_counts.size() != static_cast<std::size_t>(op.n) ||
        op.recv_counts[static_cast<std::size_t>(q)] != len)
      ++wrong;
    for (std::int64_t j = 0; j < len; ++j, ++pos)
      if (pos >= op.out.size() || op.out[pos] != index_of(q, first + j)) ++wrong;
  }
  if (op.out.size() != pos)
    wrong += std::abs(static_cast<std::int64_t>(op.out.size()) - static_cast<std::int64_t>(pos));
  return wrong;
}

double ring_allreduce_factor(int n) {
  return n > 1 ? 2.0 * (n - 1) / n : 1;
}
double allgather_factor(int n) {
  return n > 1 ? (n - 1.0) / n : 1;
}
double one(int) {
  return 1;
}

const BenchOp kOps[] = {
    {"allreduce", true, ring_allreduce_factor, setup_allreduce,
     [](OpRun& op) { op.c.allreduce_sum(std::span<float>(op.f)); }, check_allreduce},
    {"allgather-padded", true, allgather_factor, setup_allgather,
     run_allgather<comm::GatherMode::kPadded>, check_allgather},
    {"allgather-exact", true, allgather_factor, setup_allgather,
     run_allgather<comm::GatherMode::kExact>, check_allgather},
    {"broadcast", false, one, setup_broadcast,
     [](OpRun& op) { op.c.broadcast_values(std::span<float>(op.f), 0); }, check_broadcast},
    {"alltoall", false, allgather_factor, setup_alltoall, run_alltoall, check_alltoall},
};

std::string op_names() {
  std::string s;
  for (const auto& op : kOps) s += (s.empty() ? "" : ", ") + std::string(op.name);
  return s;
}

const BenchOp& find_op(const std::string& name) {
  for (const auto& op : kOps)
    if (name == op.name) return op;
  throw InvalidArgument(
      detail::concat("--op '", name, "' is not valid; expected one of ", op_names()));
}

void check_same_options(const BenchCommOptions& o, comm::Communicator& c) {
  auto fp = base_fingerprint(c);
  fp.add("bench", "comm").add("min_bytes", o.min_bytes).add("max_bytes", o.max_bytes);
  fp.add("factor", std::to_string(o.factor)).add("iters", std::to_string(o.iters));
  fp.add("small_iters", std::to_string(o.small_iters)).add("small_below", o.small_below);
  fp.add("warmup", std::to_string(o.warmup)).add("check", o.check ? "1" : "0");
  fp.add("balanced", o.balanced ? "1" : "0").add("stat", o.stat);
  std::string ops;
  for (const auto& op : o.ops) ops += op + ",";
  fp.add("ops", ops);
  std::string algorithms;
  for (const auto& a : o.algorithms) algorithms += a + ",";
  fp.add("algorithms", algorithms);
  comm::check_same_configuration(c, fp);
}

void print_header(const BenchCommOptions& o, const comm::Communicator& c) {
  const int n = c.size();
  const auto fc = rank_counts(1 << 20, n, o.balanced);
  const double f = static_cast<double>(n) *
                   static_cast<double>(*std::max_element(fc.begin(), fc.end())) / (1 << 20);
  std::printf(
      "# exdyna bench comm: engine %s, %d ranks, warm-up %d, iterations %d (%d below %s), %s "
      "lists (padded f = %.2f)\n",
      std::string(c.engine()).c_str(), n, o.warmup, o.iters,
      o.small_iters > 0 ? o.small_iters : o.iters, o.small_below.c_str(),
      o.balanced ? "balanced" : "uneven", f);
  std::printf(
      "# time: mean over ranks of the %s per call; algbw = size / time; busbw: see --help\n",
      o.stat.c_str());
  if (const auto s = c.algorithm_switch())
    std::printf(
        "# auto: log2 W rounds below %lld B (all-reduce), %lld B (all-gather); the ring "
        "above\n",
        static_cast<long long>(s->allreduce_below), static_cast<long long>(s->allgather_below));
  std::printf("#%13s %12s %-17s %11s %12s %12s %7s %9s\n", "size(B)", "count", "op", "time(us)",
              "algbw(GB/s)", "busbw(GB/s)", "wrong", "algorithm");
  std::fflush(stdout);
}

struct Row {
  double per_call = 0;     // seconds, mean over ranks
  std::int64_t wrong = 0;  // summed over ranks (0 without --check)
  std::string algorithm;   // what the engine ran ("-": the operation has no choice)
};

// Times one operation at one size on every rank (the harness: set-up, optional check, warm-up,
// barrier, timed calls, then the mean over ranks).
Row time_op(const BenchOp& b, OpRun& op, const BenchCommOptions& o, int iters) {
  std::int64_t wrong = 0;
  b.setup(op);
  if (o.check) {
    b.run(op);
    wrong = b.check(op);
    b.setup(op);
  }
  for (int i = 0; i < o.warmup; ++i) b.run(op);
  op.c.barrier();
  double per_call = 0;
  if (o.stat == "median") {
    std::vector<double> t(static_cast<std::size_t>(iters));
    for (auto& ti : t) {
      const auto t0 = Clock::now();
      b.run(op);
      ti = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    const auto mid = t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2);
    std::nth_element(t.begin(), mid, t.end());
    per_call = *mid;
  } else {
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) b.run(op);
    per_call = std::chrono::duration<double>(Clock::now() - t0).count() / std::max(iters, 1);
  }
  const std::string algorithm = b.has_algorithms ? std::string(comm::last_algorithm(op.c)) : "-";
  // Mean over ranks (as nccl-tests reports), and the wrong counts summed.
  double agg[2] = {per_call, static_cast<double>(wrong)};
  op.c.allreduce_sum(std::span<double>(agg, 2));
  return {agg[0] / op.n, static_cast<std::int64_t>(agg[1]), algorithm};
}

struct Totals {
  double busbw = 0;
  int rows = 0;
  std::int64_t wrong = 0;
};
constexpr std::int64_t kAlways = std::int64_t{1} << 62;  // a switch above every size: log rounds

void sweep_sizes(const BenchCommOptions& o, const std::vector<const BenchOp*>& ops, OpRun& op,
                 std::uint64_t lo, std::uint64_t hi, std::uint64_t small, Totals& totals);

void bench_rank(const BenchCommOptions& o, comm::Communicator& c) {
  check_same_options(o, c);
  const std::uint64_t lo = parse_byte_size(o.min_bytes, "--min-bytes");
  const std::uint64_t hi = parse_byte_size(o.max_bytes, "--max-bytes");
  EXDYNA_CHECK_ARG(lo <= hi, "--min-bytes ", lo, " is larger than --max-bytes ", hi);
  const std::uint64_t small = parse_byte_size(o.small_below, "--small-below");
  std::vector<const BenchOp*> ops;
  for (const auto& name : o.ops) ops.push_back(&find_op(name));
  const bool print = c.rank() == 0;
  if (print) print_header(o, c);
  const auto own = c.algorithm_switch();
  for (const auto& a : o.algorithms)
    EXDYNA_CHECK_ARG(a == "auto" || own, "--algorithm ", a, " is not valid on the ", c.engine(),
                     " engine, which has no choice of algorithm; expected auto");
  OpRun op(c);
  op.balanced = o.balanced;
  Totals totals;
  for (const auto& a : o.algorithms) {
    if (a == "ring") c.set_algorithm_switch({0, 0});
    if (a == "log") c.set_algorithm_switch({kAlways, kAlways});
    if (a == "auto" && own) c.set_algorithm_switch(*own);
    sweep_sizes(o, ops, op, lo, hi, small, totals);
  }
  if (own) c.set_algorithm_switch(*own);
  const std::int64_t wrong_total = totals.wrong;
  if (print) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
                o.check ? (wrong_total ? "FAILED" : "OK") : "(not checked; use --check)");
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n",
                totals.rows ? totals.busbw / totals.rows : 0.0);
    std::fflush(stdout);
  }
  if (wrong_total)
    throw Error(detail::concat("bench comm --check: ", wrong_total, " wrong elements"));
}

// One sweep of the sizes, every operation at each, rank 0 printing the rows.
void sweep_sizes(const BenchCommOptions& o, const std::vector<const BenchOp*>& ops, OpRun& op,
                 std::uint64_t lo, std::uint64_t hi, std::uint64_t small, Totals& totals) {
  const bool print = op.r == 0;
  for (std::uint64_t size = lo; size <= hi; size *= static_cast<std::uint64_t>(o.factor)) {
    op.count = static_cast<std::int64_t>(std::max<std::uint64_t>(size / 4, 1));
    for (const BenchOp* b : ops) {
      const Row row =
          time_op(*b, op, o, size < small && o.small_iters > 0 ? o.small_iters : o.iters);
      totals.wrong += row.wrong;
      const double algbw = static_cast<double>(op.count) * 4 / row.per_call / 1e9;
      const double busbw = algbw * b->bus_factor(op.n);
      totals.busbw += busbw;
      ++totals.rows;
      if (print) {
        std::printf(" %13lld %12lld %-17s %11.1f %12.3f %12.3f %7s %9s\n",
                    static_cast<long long>(op.count * 4), static_cast<long long>(op.count), b->name,
                    row.per_call * 1e6, algbw, busbw,
                    o.check ? std::to_string(row.wrong).c_str() : "N/A", row.algorithm.c_str());
        std::fflush(stdout);
      }
    }
    if (size > hi / static_cast<std::uint64_t>(o.factor)) break;
  }
}

}  // namespace

void add_bench_command(CLI::App& app, Action& action) {
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  auto* sub =
      bench->add_subcommand("comm", "collectives on a communication engine, nccl-tests style");
  auto o = std::make_shared<BenchCommOptions>();
  o->engine.workers = 4;
  add_engine_options(sub, o->engine);
  sub->add_option("--min-bytes,-b", o->min_bytes, "smallest size (e.g. 4K)")->capture_default_str();
  sub->add_option("--max-bytes,-e", o->max_bytes, "largest size (e.g. 64M)")->capture_default_str();
  sub->add_option("--step-factor,-f", o->factor, "size multiplier between rows")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  sub->add_option("--iters,-n", o->iters, "timed iterations per size")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--iters-small", o->small_iters,
                  "timed iterations per size below --small-below (0: --iters); small sizes are "
                  "quick and, with ranks sharing cores, the noisiest")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  sub->add_option("--small-below", o->small_below, "the size --iters-small applies below")
      ->capture_default_str();
  sub->add_option("--warmup,-w", o->warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  sub->add_flag("--check,-c", o->check,
                "verify every result (exact closed forms); non-zero exit on a wrong element");
  sub->add_flag("--balanced", o->balanced, "equal list lengths on every rank (no padding)");
  sub->add_option("--stat", o->stat,
                  "per rank, the mean of the timed calls (one clock around them all) or the "
                  "median of the calls timed one by one")
      ->check(CLI::IsMember({"mean", "median"}))
      ->capture_default_str();
  sub->add_option("--op", o->ops,
                  "operations: allreduce, allgather-padded, allgather-exact, broadcast")
      ->capture_default_str();
  sub->add_option("--algorithm", o->algorithms,
                  "the sweep once per algorithm: auto (the engine's switch), ring, log (log2 W "
                  "rounds: bcube all-reduce, Bruck all-gather; the gloo engine)")
      ->check(CLI::IsMember({"auto", "ring", "log"}))
      ->capture_default_str();
  sub->callback([&action, o] {
    action = [o] {
      return run_on_engine(o->engine, [o](comm::Communicator& c) { bench_rank(*o, c); });
    };
  });
  add_bench_select_command(*bench, action);
}

}  // namespace exdyna::apps
