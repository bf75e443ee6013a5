#include "exdyna/sim/select_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sim/simulate.hpp"
#include "exdyna/sim/tape.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"

namespace exdyna::sim {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  return 0.5 * (*mid + *std::max_element(v.begin(), mid));
}

SimulateConfig mode_config(SimulateConfig cfg, bool exact) {
  cfg.sparsifier = "exdyna";
  auto& o = cfg.sparse.exdyna;
  o.controller = exact ? sparsifiers::Controller::kExact : sparsifiers::Controller::kPaper;
  o.balance = exact ? sparsifiers::Balance::kExact : sparsifiers::Balance::kPaper;
  o.worker_cap = exact ? sparsifiers::ExDynaOptions::kAutoCap : 0.0;
  // The two all-gathers: a worker re-run alone replays its tape's sends byte for byte, and --fuse
  // auto sends its measured timings (the selection measured is the same on either path).
  o.fuse = sparsifiers::Fuse::kOff;
  cfg.measure_global_error = false;  // one all-reduce per step the benchmark does not need
  cfg.decisions_path.clear();
  cfg.stats_path.clear();
  return cfg;
}

// One series' per-iteration mean and max over workers (one entry per replay and iteration), and
// their medians, from its rows (sorted by replay, worker, iteration).
SelectBenchTimes series_times(const std::vector<SelectBenchStep>& steps, bool solo) {
  std::map<std::pair<int, std::int64_t>, std::pair<double, double>> at;  // sum, max
  std::map<std::pair<int, std::int64_t>, int> workers;
  for (const auto& s : steps) {
    if (s.solo != solo) continue;
    auto& [sum, top] = at[{s.replay, s.iteration}];
    sum += s.select_cpu_s;
    top = std::max(top, s.select_cpu_s);
    ++workers[{s.replay, s.iteration}];
  }
  SelectBenchTimes t;
  for (const auto& [key, v] : at) {
    t.mean_per_iteration.push_back(v.first / workers[key]);
    t.max_per_iteration.push_back(v.second);
  }
  t.median_mean_s = median(t.mean_per_iteration);
  t.median_max_s = median(t.max_per_iteration);
  return t;
}

std::vector<double> select_cpu(const WorkerResult& r) {
  std::vector<double> v;
  for (const auto& st : r.steps) v.push_back(st.times.select_cpu);
  return v;
}

// Worker w's steps of one series as rows; cpu: the series' time per step (the least of the solo
// runs for solo).
void append_steps(const WorkerResult& r, int w, bool solo, int replay_index,
                  const std::vector<double>& cpu, std::vector<SelectBenchStep>& rows) {
  for (std::size_t t = 0; t < r.steps.size(); ++t) {
    const auto& st = r.steps[t];
    SelectBenchStep s;
    s.solo = solo;
    s.replay = replay_index;
    s.iteration = st.iteration;
    s.worker = w;
    s.partition = st.own_partition;
    s.candidates = st.own_candidates;
    s.kept = st.k_per_worker.at(static_cast<std::size_t>(w));
    s.select_cpu_s = cpu[t];
    rows.push_back(s);
  }
}

// Tapes above this (all ranks together) are dropped while recording: the solo series are skipped.
constexpr std::size_t kMaxTapeBytes = std::size_t{2} << 30;

// One replay: every worker's steps, appended to the mode's rows as the group series; with solo,
// each worker then re-run alone from its tape, appended as the solo series. Returns whether the
// solo series were measured (false: not asked, or the tapes outgrew kMaxTapeBytes).
bool replay(const SimulateConfig& cfg, SelectBenchMode& mode, bool solo, int solo_runs,
            int replay_index) {
  auto src = make_source(cfg);
  const auto run = resolve(cfg, *src);
  const int n = *run.workers;
  const auto T = static_cast<std::size_t>(*run.iterations);
  const auto& registry = sparsifiers::builtin_registry();
  std::vector<sim::Tape> tapes(static_cast<std::size_t>(n));
  for (auto& t : tapes) t.limit = kMaxTapeBytes / static_cast<std::size_t>(n);
  double density = 0;
  std::mutex mu;
  comm::run_local(
      n,
      [&](comm::Communicator& c) {
        WorkerResult r;
        if (solo) {
          sim::TapeRecorder rec(c, tapes[static_cast<std::size_t>(c.rank())]);
          r = run_worker(run, registry, *src, rec);
        } else {
          r = run_worker(run, registry, *src, c);
        }
        std::lock_guard<std::mutex> lock(mu);
        append_steps(r, c.rank(), false, replay_index, select_cpu(r), mode.steps);
        if (c.rank() == 0)
          for (const auto& st : r.steps)
            density += static_cast<double>(st.k_total) / static_cast<double>(st.k_target);
      },
      std::chrono::milliseconds(static_cast<std::int64_t>(run.timeout_s * 1000.0)));
  mode.mean_density += density / static_cast<double>(T);
  if (!solo ||
      std::any_of(tapes.begin(), tapes.end(), [](const sim::Tape& t) { return t.overflowed; }))
    return false;
  for (int w = 0; w < n; ++w) {
    std::vector<double> least(T);
    WorkerResult last;
    for (int s = 0; s < solo_runs; ++s) {
      sim::TapePlayer player(tapes[static_cast<std::size_t>(w)]);
      last = run_worker(run, registry, *src, player);
      EXDYNA_CHECK(player.finished(), "bench select: the solo replay of rank ", w,
                   " ended before its tape");
      const auto v = select_cpu(last);
      for (std::size_t t = 0; t < T; ++t) least[t] = s == 0 ? v[t] : std::min(least[t], v[t]);
    }
    append_steps(last, w, true, replay_index, least, mode.steps);
    tapes[static_cast<std::size_t>(w)].entries = {};  // free as we go
  }
  return true;
}

}  // namespace

SelectBenchResult bench_select(const SimulateConfig& cfg, const SelectBenchOptions& opt) {
  const int repeat = opt.repeat;
  EXDYNA_CHECK_ARG(repeat >= 1, "--repeat: ", repeat, " is not valid; expected an integer >= 1");
  EXDYNA_CHECK_ARG(opt.solo_runs >= 1, "--solo-runs: ", opt.solo_runs,
                   " is not valid; expected an integer >= 1");
  SelectBenchResult res;
  res.paper.name = "paper";
  res.exact.name = "exact";
  res.solo = opt.solo;
  const auto paper = mode_config(cfg, false), exact = mode_config(cfg, true);
  for (int r = 0; r < repeat; ++r) {  // alternating, so a slow spell of the machine hits both
    res.solo = replay(paper, res.paper, res.solo, opt.solo_runs, r);
    res.solo = replay(exact, res.exact, res.solo, opt.solo_runs, r);
  }
  for (auto* m : {&res.paper, &res.exact}) {
    if (!res.solo)  // a replay whose tapes overflowed left some solo rows
      std::erase_if(m->steps, [](const SelectBenchStep& s) { return s.solo; });
    // The group rows came in as the threads finished.
    std::stable_sort(m->steps.begin(), m->steps.end(), [](const auto& a, const auto& b) {
      return std::tie(a.solo, a.replay, a.worker, a.iteration) <
             std::tie(b.solo, b.replay, b.worker, b.iteration);
    });
    m->group = series_times(m->steps, false);
    m->solo = series_times(m->steps, true);  // empty without solo rows
    m->mean_density /= repeat;
  }
  res.clock_lap_s = core::thread_cpu_lap_cost();
  res.laps_per_step = sparsifiers::ExDyna::kSelectCpuLaps;
  return res;
}

std::string select_steps_csv(const SelectBenchResult& r) {
  std::string out = "mode,series,replay,iteration,worker,partition,candidates,kept,select_cpu_us\n";
  char line[160];
  for (const auto* m : {&r.paper, &r.exact})
    for (const auto& s : m->steps) {
      std::snprintf(line, sizeof line, "%s,%s,%d,%lld,%d,%lld,%lld,%lld,%.4f\n", m->name.c_str(),
                    s.solo ? "solo" : "group", s.replay, static_cast<long long>(s.iteration),
                    s.worker, static_cast<long long>(s.partition),
                    static_cast<long long>(s.candidates), static_cast<long long>(s.kept),
                    s.select_cpu_s * 1e6);
      out += line;
    }
  return out;
}

double SelectBenchResult::net_ratio_mean(bool solo_series) const {
  const double clock = laps_per_step * clock_lap_s;
  const double p = (solo_series ? paper.solo : paper.group).median_mean_s - clock;
  const double e = (solo_series ? exact.solo : exact.group).median_mean_s - clock;
  return p > 0 ? e / p : 0.0;
}

}  // namespace exdyna::sim
