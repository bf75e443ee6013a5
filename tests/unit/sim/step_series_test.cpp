// StepSeries: what a run keeps of every iteration when it keeps no StepStats.
#include "exdyna/sim/step_series.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "exdyna/core/hash.hpp"
#include "exdyna/sim/simulate.hpp"
#include "exdyna/sparsifiers/registry.hpp"

namespace exdyna::sim {
namespace {

SimulateConfig small_run(bool keep) {
  SimulateConfig cfg;
  cfg.workers = 3;
  cfg.iterations = 30;
  cfg.n_grad = 5000;
  cfg.seed = 7;
  cfg.sparse.density = 0.01;
  // Two runs are compared byte for byte: the two all-gathers every step (--fuse auto chooses the
  // path from measured times).
  cfg.sparse.exdyna.fuse = sparsifiers::Fuse::kOff;
  cfg.keep_steps = keep;
  return cfg;
}

WorkerResult run(const SimulateConfig& config) {
  auto src = make_source(config);
  const auto cfg = resolve(config, *src);
  return run_in_process(cfg, sparsifiers::builtin_registry(), *src);
}

TEST(StepSeries, DigestIsTheFnv1aOfTheDecisionsCsv) {
  const auto res = run(small_run(true));
  ASSERT_EQ(res.steps.size(), 30u);
  const std::string csv = decisions_csv(res.steps, 3);
  EXPECT_EQ(res.series.decisions_fnv1a(), core::fnv1a(csv.data(), csv.size()));
  EXPECT_EQ(digest_hex(res.series.decisions_fnv1a()).size(), 16u);
}

TEST(StepSeries, KeepsTheSummaryNumbersWithoutTheSteps) {
  const auto kept = run(small_run(true));
  const auto lean = run(small_run(false));
  EXPECT_TRUE(lean.steps.empty());
  ASSERT_EQ(lean.series.size(), 30);
  EXPECT_EQ(lean.series.decisions_fnv1a(), kept.series.decisions_fnv1a());
  double bytes = 0;
  for (std::size_t t = 0; t < kept.steps.size(); ++t) {
    EXPECT_EQ(lean.series.density()[t], kept.steps[t].density) << t;
    EXPECT_EQ(lean.series.f_t()[t], kept.steps[t].f_t) << t;
    bytes += static_cast<double>(kept.steps[t].bytes.total());
  }
  EXPECT_EQ(static_cast<double>(lean.series.bytes().total()), bytes);
  EXPECT_EQ(lean.series.k_target(), kept.steps[0].k_target);
  const auto a = summarize(small_run(true), kept), b = summarize(small_run(false), lean);
  EXPECT_EQ(a.density_ratio.mean, b.density_ratio.mean);
  EXPECT_EQ(a.f_t.max, b.f_t.max);
  EXPECT_EQ(a.mean_bytes, b.mean_bytes);
  EXPECT_EQ(a.settled_at, b.settled_at);
}

TEST(StepSeries, ADifferentDecisionChangesTheDigest) {
  auto cfg = small_run(false);
  const auto a = run(cfg);
  cfg.sparse.density = 0.02;
  const auto b = run(cfg);
  EXPECT_NE(a.series.decisions_fnv1a(), b.series.decisions_fnv1a());
}

TEST(StepSeries, ResourcesAreSampledOnEveryRankWhenAsked) {
  auto cfg = small_run(false);
  EXPECT_TRUE(run(cfg).resources.empty());
  cfg.measure_resources = true;
  const auto res = run(cfg);
  ASSERT_EQ(res.resources.size(), 3u);
  for (const auto& r : res.resources) {
    EXPECT_EQ(r.warm_iteration, 15);
    EXPECT_GT(r.rss_warm, 0);
    EXPECT_GT(r.rss_end, 0);
    EXPECT_GT(r.fds_end, 2);  // at least stdin, stdout, stderr
  }
}

}  // namespace
}  // namespace exdyna::sim
