// Scale steps on any source: ScaledSource multiplies by the product of the factors at or before
// each iteration, and `simulate` on a trace with scale steps replays the scaled gradients and
// reports the recovery after each step, as on the synthetic source.
#include "exdyna/sim/scaled_source.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/sim/simulate.hpp"
#include "exdyna/sim/trace_source.hpp"
#include "unit/temp_dir_test_base.hpp"

using namespace exdyna;
using namespace exdyna::sim;

namespace {

class ScaledSourceTest : public TempDirTest {
 protected:
  ScaledSourceTest() : TempDirTest("exdyna_scaled_") {}
};

SyntheticOptions small_stream() {
  SyntheticOptions o;
  o.n_g = 4096;
  o.layers = 4;
  o.seed = 7;
  return o;
}

}  // namespace

TEST(ScaledSource, FactorIsTheProductOfTheStepsAtOrBefore) {
  ScaledSource s(std::make_unique<SyntheticSource>(small_stream()),
                 {{10, 0.1}, {5, 4.0}, {10, 0.5}});
  EXPECT_DOUBLE_EQ(s.factor(0), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(4), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(5), 4.0);
  EXPECT_DOUBLE_EQ(s.factor(9), 4.0);
  EXPECT_DOUBLE_EQ(s.factor(10), 4.0 * 0.1 * 0.5);
  EXPECT_DOUBLE_EQ(s.factor(1000), 4.0 * 0.1 * 0.5);
  EXPECT_EQ(s.n_g(), 4096);
  EXPECT_EQ(s.workers(), -1);
  EXPECT_EQ(s.iterations(), -1);
}

TEST(ScaledSource, FillScalesTheInnerGradient) {
  ScaledSource s(std::make_unique<SyntheticSource>(small_stream()), {{3, 0.1}});
  SyntheticSource plain(small_stream());
  std::vector<float> got(4096), raw(4096);
  for (std::int64_t t : {0, 2, 3, 8}) {
    s.fill(t, 1, got);
    plain.fill(t, 1, raw);
    const double f = t >= 3 ? 0.1 : 1.0;
    for (std::size_t i = 0; i < raw.size(); ++i)
      ASSERT_EQ(got[i], static_cast<float>(static_cast<double>(raw[i]) * f)) << t << " " << i;
  }
}

TEST(ScaledSource, BadStepsAreRefused) {
  EXPECT_THROW(ScaledSource(std::make_unique<SyntheticSource>(small_stream()), {{-1, 0.5}}),
               InvalidArgument);
  EXPECT_THROW(ScaledSource(std::make_unique<SyntheticSource>(small_stream()), {{2, 0}}),
               InvalidArgument);
  EXPECT_THROW(ScaledSource(std::make_unique<SyntheticSource>(small_stream()), {{2, NAN}}),
               InvalidArgument);
}

TEST_F(ScaledSourceTest, SimulateOnATraceAppliesScaleStepsAndReportsTheRecovery) {
  const auto trace = dir_ / "trace";
  SyntheticSource src(small_stream());
  write_trace(trace, src, 2, 24);

  SimulateConfig cfg;
  cfg.sparsifier = "exdyna";
  cfg.trace_dir = trace;
  cfg.sparse.density = 0.01;
  cfg.sparse.exdyna.controller = sparsifiers::Controller::kHistogram;
  cfg.synthetic.scale_steps = {{12, 0.1}};
  cfg.timeout_s = 60;
  auto scaled = make_source(cfg);
  ASSERT_NE(dynamic_cast<ScaledSource*>(scaled.get()), nullptr);
  const auto resolved = resolve(cfg, *scaled);
  EXPECT_EQ(*resolved.workers, 2);
  EXPECT_EQ(*resolved.iterations, 24);

  // The replay sees the scaled gradients: identical decisions before the step; at the step the
  // threshold (decided from iteration 11) is the same but selects fewer of the smaller gradients,
  // and the controller lowers it afterwards. The summary names the step and measures the recovery.
  const auto with = run_in_process(resolved, sparsifiers::builtin_registry(), *scaled);
  auto plain_cfg = cfg;
  plain_cfg.synthetic.scale_steps.clear();
  auto plain = make_source(plain_cfg);
  const auto without =
      run_in_process(resolve(plain_cfg, *plain), sparsifiers::builtin_registry(), *plain);
  ASSERT_EQ(with.steps.size(), 24u);
  for (std::size_t t = 0; t < 12; ++t) {
    EXPECT_EQ(with.steps[t].threshold, without.steps[t].threshold) << t;
    EXPECT_EQ(with.steps[t].k_total, without.steps[t].k_total) << t;
  }
  EXPECT_EQ(with.steps[12].threshold, without.steps[12].threshold);
  EXPECT_LT(with.steps[12].k_total, 0.8 * static_cast<double>(without.steps[12].k_total));
  EXPECT_LT(with.steps[23].threshold, 0.6 * without.steps[23].threshold);

  const auto s = summarize(resolved, with);
  ASSERT_EQ(s.recoveries.size(), 1u);
  EXPECT_EQ(s.recoveries[0].iteration, 12);
  EXPECT_DOUBLE_EQ(s.recoveries[0].factor, 0.1);
  std::ostringstream os;
  print_summary(os, resolved, *scaled, s);
  EXPECT_NE(os.str().find("x0.1 at 12"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("after x0.1 at 12: back in"), std::string::npos) << os.str();
}

TEST_F(ScaledSourceTest, BadScaleStepsOnATraceAreRefusedByName) {
  SimulateConfig cfg;
  cfg.trace_dir = dir_;
  cfg.synthetic.scale_steps = {{5, -2}};
  try {
    cfg.validate();
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("factor -2"), std::string::npos) << e.what();
  }
}
