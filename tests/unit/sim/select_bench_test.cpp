// sim/select_bench.hpp: the solo measurement re-runs each worker alone from a tape of its group
// run, and that re-run makes the group run's decisions step for step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sim/select_bench.hpp"
#include "exdyna/sim/simulate.hpp"
#include "exdyna/sim/tape.hpp"
#include "exdyna/sparsifiers/registry.hpp"

using namespace exdyna;
using namespace exdyna::sim;

namespace {

SimulateConfig exact_config(int workers, std::int64_t n_g, std::int64_t iterations) {
  SimulateConfig c;
  c.sparsifier = "exdyna";
  c.workers = workers;
  c.n_grad = n_g;
  c.iterations = iterations;
  c.sparse.density = 0.01;
  c.sparse.exdyna.controller = sparsifiers::Controller::kExact;
  c.sparse.exdyna.balance = sparsifiers::Balance::kExact;
  c.sparse.exdyna.worker_cap = sparsifiers::ExDynaOptions::kAutoCap;
  // As bench_select runs it: --fuse auto's timing words are measurements a tape cannot replay.
  c.sparse.exdyna.fuse = sparsifiers::Fuse::kOff;
  c.timeout_s = 60;
  return c;
}

}  // namespace

TEST(SelectBench, AWorkerReRunAloneFromItsTapeMakesTheGroupsDecisions) {
  auto src = make_source(exact_config(4, 1 << 15, 12));
  const auto run = resolve(exact_config(4, 1 << 15, 12), *src);
  const auto& registry = sparsifiers::builtin_registry();
  std::vector<sim::Tape> tapes(4);
  std::vector<WorkerResult> group(4);
  std::mutex mu;
  comm::run_local(4, [&](comm::Communicator& c) {
    sim::TapeRecorder rec(c, tapes[static_cast<std::size_t>(c.rank())]);
    auto r = run_worker(run, registry, *src, rec);
    const std::lock_guard<std::mutex> lock(mu);
    group[static_cast<std::size_t>(c.rank())] = std::move(r);
  });
  for (int w = 0; w < 4; ++w) {
    sim::TapePlayer player(tapes[static_cast<std::size_t>(w)]);
    const auto solo = run_worker(run, registry, *src, player);
    EXPECT_TRUE(player.finished());
    const auto& g = group[static_cast<std::size_t>(w)];
    ASSERT_EQ(solo.steps.size(), g.steps.size());
    for (std::size_t t = 0; t < g.steps.size(); ++t) {
      EXPECT_EQ(solo.steps[t].k_per_worker, g.steps[t].k_per_worker) << "rank " << w << " t " << t;
      EXPECT_EQ(solo.steps[t].threshold, g.steps[t].threshold) << "rank " << w << " t " << t;
    }
    // Exact from iteration 0: every step sends k (a check that the run is the exact controller's).
    EXPECT_EQ(g.steps.front().k_total, g.steps.front().k_target);
  }
}

TEST(SelectBench, MeasuresTheSoloSeriesBesideTheGroupOnes) {
  auto cfg = exact_config(3, 1 << 15, 6);
  const auto with = bench_select(cfg, {1, true, 2});
  EXPECT_TRUE(with.solo);
  for (const auto* m : {&with.paper, &with.exact}) {
    EXPECT_EQ(m->group.mean_per_iteration.size(), 6u) << m->name;
    EXPECT_EQ(m->solo.mean_per_iteration.size(), 6u) << m->name;
    EXPECT_GT(m->solo.median_mean_s, 0) << m->name;
    EXPECT_GE(m->solo.median_max_s, m->solo.median_mean_s) << m->name;
  }
  EXPECT_NEAR(with.exact.mean_density, 1.0, 0.01);  // the exact controller ran as meant
  const auto without = bench_select(cfg, {1, false, 1});
  EXPECT_FALSE(without.solo);
  EXPECT_TRUE(without.exact.solo.mean_per_iteration.empty());
  EXPECT_EQ(without.exact.group.mean_per_iteration.size(), 6u);
}

TEST(SelectBench, TheNetRatioTakesTheClocksLapsOffBothModes) {
  SelectBenchResult r;
  r.paper.group.median_mean_s = 5e-6;
  r.exact.group.median_mean_s = 11e-6;
  r.paper.solo.median_mean_s = 4e-6;
  r.exact.solo.median_mean_s = 10e-6;
  r.laps_per_step = 2;
  r.clock_lap_s = 0.5e-6;
  EXPECT_NEAR(r.ratio_mean(), 2.2, 1e-12);
  EXPECT_NEAR(r.net_ratio_mean(false), 10.0 / 4.0, 1e-12);
  EXPECT_NEAR(r.net_ratio_mean(true), 9.0 / 3.0, 1e-12);
  r.clock_lap_s = 2e-6;  // the clock's cost exceeds the paper mode's solo median: no ratio
  EXPECT_EQ(r.net_ratio_mean(true), 0.0);
}

TEST(SelectBench, MeasuresTheClocksLapWithTheRun) {
  const auto r = bench_select(exact_config(2, 1 << 16, 3), {1, false, 1});
  EXPECT_GT(r.clock_lap_s, 0.0);
  EXPECT_EQ(r.laps_per_step, 2);
  EXPECT_GT(r.net_ratio_mean(false), 0.0);
}

TEST(SelectBench, RefusesNoReplaysAndNoSoloRuns) {
  const auto cfg = exact_config(2, 1 << 12, 2);
  EXPECT_THROW(bench_select(cfg, {0, true, 1}), InvalidArgument);
  EXPECT_THROW(bench_select(cfg, {1, true, 0}), InvalidArgument);
}

TEST(SelectBench, KeepsEveryWorkersStepsWithWhatItsTimeGrowsWith) {
  const auto cfg = exact_config(3, 1 << 15, 6);
  const auto r = bench_select(cfg, {1, true, 2});
  const std::int64_t k = static_cast<std::int64_t>(0.01 * (1 << 15));
  for (const auto* m : {&r.paper, &r.exact}) {
    ASSERT_EQ(m->steps.size(), 2u * 3 * 6) << m->name;  // group and solo, 3 workers, 6 steps
    for (bool solo : {false, true})
      for (std::int64_t t = 0; t < 6; ++t) {
        std::int64_t part = 0, kept = 0;
        for (const auto& s : m->steps) {
          if (s.solo != solo || s.iteration != t) continue;
          part += s.partition;
          kept += s.kept;
          EXPECT_GT(s.select_cpu_s, 0) << m->name;
          if (m->name == "paper") EXPECT_EQ(s.candidates, 0);
          // The exact controller keeps some of what its pass counted (or one index from none).
          if (m->name == "exact") EXPECT_TRUE(s.candidates >= s.kept || s.kept == 1);
        }
        EXPECT_EQ(part, 1 << 15) << m->name << " t " << t;  // the partitions cover the vector
        if (m->name == "exact") EXPECT_EQ(kept, k) << "t " << t;
      }
  }
  const auto csv = select_steps_csv(r);
  EXPECT_EQ(csv.rfind("mode,series,replay,iteration,worker,partition,candidates,kept,"
                      "select_cpu_us\n",
                      0),
            0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 2 * 3 * 6);
  EXPECT_NE(csv.find("\nexact,solo,0,5,2,"), std::string::npos);
}
