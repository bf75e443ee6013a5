#include "exdyna/eval/cell_cpu.hpp"

#include <algorithm>
#include <cmath>

#include "exdyna/core/error.hpp"
#include "exdyna/eval/measurements.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;

double StatsColumns::mean(const std::string& name) const {
  const auto it = col.find(name);
  EXDYNA_CHECK_T(DataError, it != col.end(), "stats.csv has no column ", name);
  double s = 0;
  std::size_t n = 0;
  for (double v : it->second)
    if (!std::isnan(v)) s += v, ++n;
  return n ? s / static_cast<double>(n) : std::nan("");
}

StatsColumns read_rank_stats(const fs::path& path, int warmup) {
  const CsvTable t = CsvTable::read(path, {"iteration", "t_cpu", "t_non_comm", "t_select"});
  StatsColumns s;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    if (t.num(r, "iteration") < warmup) continue;
    for (const auto& h : t.header()) s.col[h].push_back(t.num_or_nan(r, h));
    ++s.rows;
  }
  EXDYNA_CHECK_T(DataError, s.rows > 0, path.string(), " has no measured iteration (warm-up ",
                 warmup, ")");
  return s;
}

std::vector<StatsColumns> read_run_stats(const fs::path& dir, int workers, int warmup) {
  std::vector<StatsColumns> out{read_rank_stats(dir / "stats.csv", warmup)};
  for (int r = 1; r < workers; ++r) {
    const fs::path p = dir / "logs" / ("stats-r" + std::to_string(r) + ".csv");
    if (fs::exists(p)) out.push_back(read_rank_stats(p, warmup));
  }
  return out;
}

namespace {

// A rank's non-communication CPU time in one measured iteration, and its selection's.
IterationCpu rank_iteration(const StatsColumns& r, std::size_t i) {
  // The CPU time inside collectives is the sweep's to charge (comm_ms), not non-comm's.
  const auto in_comm = r.col.find("t_cpu_comm");
  const double c = r.col.at("t_cpu")[i] - (in_comm != r.col.end() ? in_comm->second[i] : 0.0);
  // The select phases' own CPU time where the statistics have it (older ones: the wall time
  // deflated by how much core sharing inflated the rank's non-comm phases).
  const auto sel_cpu = r.col.find("t_select_cpu");
  const double wall = r.col.at("t_non_comm")[i];
  const double sel = sel_cpu != r.col.end()
                         ? sel_cpu->second[i]
                         : r.col.at("t_select")[i] / (c > 0 ? std::max(1.0, wall / c) : 1.0);
  return {i, c, sel};
}

}  // namespace

// Per measured iteration the slowest rank's, since the collectives wait for it: CLT-k's leader
// selects while the others wait, and the leader rotates, so a rank's own median would miss the
// leader's work (a per-rank median then maximum charged CLT-k at 4 and 8 hosts 15 ms instead of
// 120-175). Then the median iteration (the lower middle of an even count): it ignores the
// iterations that still carry one-time costs (an ExDyna worker whose partition grows past any it
// had grows its buffers; first touches of memory), at a different iteration on each rank, and one
// iteration slowed by the machine.
IterationCpu median_iteration(const std::vector<StatsColumns>& ranks) {
  std::vector<IterationCpu> its;
  for (std::size_t i = 0; i < ranks.front().rows; ++i) {
    IterationCpu slowest{i, -1, 0};
    for (const auto& r : ranks)
      if (i < r.rows) {
        const IterationCpu c = rank_iteration(r, i);
        if (c.non_comm_s > slowest.non_comm_s) slowest = c;
      }
    its.push_back(slowest);
  }
  const auto mid = its.begin() + static_cast<std::ptrdiff_t>((its.size() - 1) / 2);
  std::nth_element(its.begin(), mid, its.end(),
                   [](const auto& a, const auto& b) { return a.non_comm_s < b.non_comm_s; });
  return *mid;
}

}  // namespace exdyna::eval
