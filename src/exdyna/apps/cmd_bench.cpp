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
//   broadcast          `size` bytes from rank 0 to every rank; busbw = algbw.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "exdyna/apps/commands.hpp"
#include "exdyna/apps/engine_cli.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::apps {

namespace {

struct BenchCommOptions {
  EngineCli engine;
  std::string min_bytes = "4K";
  std::string max_bytes = "16M";
  int factor = 4;
  int iters = 20;
  int warmup = 3;
  bool check = false;
  bool balanced = false;
  std::vector<std::string> ops{"allreduce", "allgather-padded", "allgather-exact"};
};

std::uint64_t parse_size(const std::string& s, const char* opt) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  EXDYNA_CHECK_ARG(pos > 0, opt, " '", s,
                   "' is not valid; expected a size such as 4096, 64K, 16M or 1G");
  std::string suffix = s.substr(pos);
  double mul = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB")
    mul = 1024;
  else if (suffix == "M" || suffix == "MiB")
    mul = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB")
    mul = 1024.0 * 1024 * 1024;
  else
    EXDYNA_CHECK_ARG(suffix.empty() || suffix == "B", opt, " '", s,
                     "' has an unknown unit; expected B, K, M or G");
  EXDYNA_CHECK_ARG(v > 0 && v * mul <= 4.0 * 1024 * 1024 * 1024, opt, " '", s,
                   "' is not valid; expected 4 B .. 4 GiB");
  return static_cast<std::uint64_t>(v * mul);
}

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

void bench_rank(const BenchCommOptions& o, comm::Communicator& c) {
  auto fp = base_fingerprint(c);
  fp.add("bench", "comm").add("min_bytes", o.min_bytes).add("max_bytes", o.max_bytes);
  fp.add("factor", std::to_string(o.factor)).add("iters", std::to_string(o.iters));
  fp.add("warmup", std::to_string(o.warmup)).add("check", o.check ? "1" : "0");
  fp.add("balanced", o.balanced ? "1" : "0");
  std::string ops;
  for (const auto& op : o.ops) ops += op + ",";
  fp.add("ops", ops);
  comm::check_same_configuration(c, fp);

  const int n = c.size();
  const int r = c.rank();
  const std::uint64_t lo = parse_size(o.min_bytes, "--min-bytes");
  const std::uint64_t hi = parse_size(o.max_bytes, "--max-bytes");
  EXDYNA_CHECK_ARG(lo <= hi, "--min-bytes ", lo, " is larger than --max-bytes ", hi);
  const bool print = r == 0;
  if (print) {
    const auto fc = rank_counts(1 << 20, n, o.balanced);
    const double f = static_cast<double>(n) *
                     static_cast<double>(*std::max_element(fc.begin(), fc.end())) / (1 << 20);
    std::printf(
        "# exdyna bench comm: engine %s, %d ranks, warm-up %d, iterations %d, %s lists (padded f = "
        "%.2f)\n",
        std::string(c.engine()).c_str(), n, o.warmup, o.iters, o.balanced ? "balanced" : "uneven",
        f);
    std::printf(
        "# time: mean over ranks of the mean per call; algbw = size / time; busbw: see --help\n");
    std::printf("#%13s %12s %-17s %11s %12s %12s %7s\n", "size(B)", "count", "op", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "wrong");
    std::fflush(stdout);
  }
  double busbw_sum = 0;
  int rows = 0;
  std::int64_t wrong_total = 0;
  std::vector<float> fbuf;
  std::vector<std::uint32_t> mine, out;
  for (std::uint64_t size = lo; size <= hi; size *= static_cast<std::uint64_t>(o.factor)) {
    const auto count = static_cast<std::int64_t>(std::max<std::uint64_t>(size / 4, 1));
    for (const auto& op : o.ops) {
      std::int64_t wrong = 0;
      std::function<void()> call;
      double bus_factor = 1;
      if (op == "allreduce") {
        bus_factor = n > 1 ? 2.0 * (n - 1) / n : 1;
        fbuf.resize(static_cast<std::size_t>(count));
        auto fill = [&] {
          for (std::size_t i = 0; i < fbuf.size(); ++i)
            fbuf[i] = static_cast<float>((r + 1) * (static_cast<int>(i % 251) + 1));
        };
        fill();
        call = [&] { c.allreduce_sum(std::span<float>(fbuf)); };
        if (o.check) {
          call();
          const float tri = static_cast<float>(n * (n + 1) / 2);
          for (std::size_t i = 0; i < fbuf.size(); ++i)
            if (fbuf[i] != tri * static_cast<float>(static_cast<int>(i % 251) + 1)) ++wrong;
          fill();
        }
      } else if (op == "broadcast") {
        // CLT-k's leader indices: rank 0 sends size bytes to every rank.
        fbuf.assign(static_cast<std::size_t>(count), r == 0 ? 1.0f : 0.0f);
        call = [&] { c.broadcast_values(std::span<float>(fbuf), 0); };
        if (o.check) {
          call();
          wrong += std::count_if(fbuf.begin(), fbuf.end(), [](float v) { return v != 1.0f; });
        }
      } else {
        const bool padded = op == "allgather-padded";
        EXDYNA_CHECK_ARG(padded || op == "allgather-exact", "--op '", op,
                         "' is not valid; expected allreduce, allgather-padded, allgather-exact "
                         "or broadcast");
        bus_factor = n > 1 ? (n - 1.0) / n : 1;
        const auto counts = rank_counts(count, n, o.balanced);
        mine.resize(static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]));
        for (std::size_t j = 0; j < mine.size(); ++j)
          mine[j] = (static_cast<std::uint32_t>(r) << 24) | (j & 0xffffff);
        const auto mode = padded ? comm::GatherMode::kPadded : comm::GatherMode::kExact;
        call = [&, counts, mode] {
          c.allgather_list(std::span<const std::uint32_t>(mine), counts, mode, out);
        };
        if (o.check) {
          std::fill(out.begin(), out.end(), 0xffffffffu);
          call();
          std::size_t pos = 0;
          for (int q = 0; q < n; ++q)
            for (std::int64_t j = 0; j < counts[static_cast<std::size_t>(q)]; ++j, ++pos)
              if (pos >= out.size() || out[pos] != ((static_cast<std::uint32_t>(q) << 24) |
                                                    (static_cast<std::uint32_t>(j) & 0xffffff)))
                ++wrong;
          if (out.size() != static_cast<std::size_t>(count))
            wrong += std::abs(static_cast<std::int64_t>(out.size()) - count);
        }
      }
      for (int i = 0; i < o.warmup; ++i) call();
      c.barrier();
      const auto t0 = Clock::now();
      for (int i = 0; i < o.iters; ++i) call();
      double per_call =
          std::chrono::duration<double>(Clock::now() - t0).count() / std::max(o.iters, 1);
      // Mean over ranks (as nccl-tests reports), and the wrong counts summed.
      double agg[2] = {per_call, static_cast<double>(wrong)};
      c.allreduce_sum(std::span<double>(agg, 2));
      per_call = agg[0] / n;
      wrong = static_cast<std::int64_t>(agg[1]);
      wrong_total += wrong;
      const double bytes = static_cast<double>(count) * 4;
      const double algbw = bytes / per_call / 1e9;
      busbw_sum += algbw * bus_factor;
      ++rows;
      if (print) {
        std::printf(" %13lld %12lld %-17s %11.1f %12.3f %12.3f %7s\n",
                    static_cast<long long>(count * 4), static_cast<long long>(count), op.c_str(),
                    per_call * 1e6, algbw, algbw * bus_factor,
                    o.check ? std::to_string(wrong).c_str() : "N/A");
        std::fflush(stdout);
      }
    }
    if (size > hi / static_cast<std::uint64_t>(o.factor)) break;
  }
  if (print) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_total),
                o.check ? (wrong_total ? "FAILED" : "OK") : "(not checked; use --check)");
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? busbw_sum / rows : 0.0);
    std::fflush(stdout);
  }
  if (wrong_total)
    throw Error(detail::concat("bench comm --check: ", wrong_total, " wrong elements"));
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
  sub->add_option("--warmup,-w", o->warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  sub->add_flag("--check,-c", o->check,
                "verify every result (exact closed forms); non-zero exit on a wrong element");
  sub->add_flag("--balanced", o->balanced, "equal list lengths on every rank (no padding)");
  sub->add_option("--op", o->ops,
                  "operations: allreduce, allgather-padded, allgather-exact, broadcast")
      ->capture_default_str();
  sub->callback([&action, o] {
    action = [o] {
      return run_on_engine(o->engine, [o](comm::Communicator& c) { bench_rank(*o, c); });
    };
  });
}

}  // namespace exdyna::apps
