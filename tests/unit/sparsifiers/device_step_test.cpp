// ExDyna's and dense's step_device (the GPU path's algorithm) take step()'s decisions: the same
// threshold, counts, partitions and gathered indices, and the same sums, on the same gradients,
// here with the CPU kernels behind the DeviceStep interface (host_device_step.hpp). Paper and
// exact controllers, paper and exact balance, odd world sizes, a cold start and a worker cap.
#include <gtest/gtest.h>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sparsifiers/dense.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "unit/sparsifiers/device_path_checks.hpp"
#include "unit/sparsifiers/host_device_step.hpp"
#include "unit/sparsifiers/layered_gradient.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

struct Mode {
  sparsifiers::Controller controller;
  sparsifiers::Balance balance;
  double cap;  // 0: none, kAutoCap: the automatic cap
};

SparsifierConfig config(std::int64_t n_g, int n, int rank, double d, const Mode& m) {
  SparsifierConfig c = test::device_path_config(n_g, n, rank, d);
  c.exdyna.controller = m.controller;
  c.exdyna.balance = m.balance;
  c.exdyna.worker_cap = m.cap;
  // The device gathers counts and indices apart; the host step's fused all-gather (its own
  // tests: fused_gather_test.cpp) would send other bytes for the same decisions.
  c.exdyna.fuse = sparsifiers::Fuse::kOff;
  return c;
}

void expect_same_stats(const StepStats& a, const StepStats& b) {
  test::expect_same_decisions(a, b);
  EXPECT_EQ(a.bytes.total(), b.bytes.total());
}

// Runs `steps` iterations of both paths side by side on every rank, each with its own residual.
void run_both(int n, std::int64_t n_g, double d, const Mode& m, int steps) {
  comm::run_local(n, [&](comm::Communicator& c) {
    const int r = c.rank();
    ExDyna host(config(n_g, n, r, d, m)), dev(config(n_g, n, r, d, m));
    test::HostDeviceStep device;
    std::vector<float> g(static_cast<std::size_t>(n_g)), res_h(g.size()), res_d(g.size());
    std::vector<float> acc_h(g.size()), acc_d(g.size());
    SparseResult out;
    for (int t = 0; t < steps; ++t) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << " iteration " << t);
      test::fill_layered_gradient(g, r, t);
      for (std::size_t i = 0; i < g.size(); ++i) {
        acc_h[i] = res_h[i] + g[i];
        acc_d[i] = res_d[i] + g[i];
      }
      StepStats sh, sd;
      const auto b0 = c.bytes();
      host.step(acc_h, c, out, sh);
      sh.bytes = c.bytes() - b0;
      const auto b1 = c.bytes();
      dev.step_device(acc_d.data(), device, c, sd);
      sd.bytes = c.bytes() - b1;
      expect_same_stats(sh, sd);
      ASSERT_EQ(static_cast<std::int64_t>(out.indices.size()), device.gathered_count());
      res_h = acc_h;
      res_d = acc_d;
      for (std::size_t j = 0; j < out.indices.size(); ++j) {
        ASSERT_EQ(out.indices[j], device.gathered()[j]) << "gathered index " << j;
        ASSERT_EQ(out.values[j], device.sums()[j]) << "sum " << j;
        res_h[out.indices[j]] = 0;
        res_d[device.gathered()[j]] = 0;
      }
    }
    EXPECT_EQ(host.threshold(), dev.threshold());
    EXPECT_EQ(host.save_state(), dev.save_state());
  });
}

}  // namespace

class DeviceStepModes : public ::testing::TestWithParam<int> {};

TEST_P(DeviceStepModes, PaperControllerTakesStepsDecisions) {
  run_both(GetParam(), 50'000, 0.01,
           {sparsifiers::Controller::kPaper, sparsifiers::Balance::kPaper, 0}, 24);
}

TEST_P(DeviceStepModes, PaperControllerWithExactBalanceTakesStepsDecisions) {
  run_both(GetParam(), 40'000, 0.02,
           {sparsifiers::Controller::kPaper, sparsifiers::Balance::kExact, 0}, 20);
}

TEST_P(DeviceStepModes, ExactControllerWithCapTakesStepsDecisions) {
  run_both(GetParam(), 60'000, 0.01,
           {sparsifiers::Controller::kExact, sparsifiers::Balance::kExact,
            sparsifiers::ExDynaOptions::kAutoCap},
           24);
}

TEST_P(DeviceStepModes, ExactControllerWithoutCapTakesStepsDecisions) {
  run_both(GetParam(), 30'011, 0.005,
           {sparsifiers::Controller::kExact, sparsifiers::Balance::kPaper, 0}, 20);
}

INSTANTIATE_TEST_SUITE_P(Workers, DeviceStepModes, ::testing::Values(1, 3, 4));

TEST(DeviceStep, HistogramControllerAndSixteenBitValuesAreRefusedByName) {
  comm::run_local(1, [&](comm::Communicator& c) {
    Mode m{sparsifiers::Controller::kHistogram, sparsifiers::Balance::kPaper, 0};
    ExDyna hist(config(1000, 1, 0, 0.01, m));
    EXPECT_FALSE(hist.runs_on_device());
    std::vector<float> acc(1000, 1.0f);
    test::HostDeviceStep device;
    StepStats s;
    try {
      hist.step_device(acc.data(), device, c, s);
      FAIL() << "expected a refusal";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("controller histogram"), std::string::npos) << e.what();
    }
    auto cfg = config(1000, 1, 0, 0.01,
                      {sparsifiers::Controller::kPaper, sparsifiers::Balance::kPaper, 0});
    cfg.values = core::ValueFormat::kBf16;
    EXPECT_FALSE(ExDyna(cfg).runs_on_device());
    EXPECT_FALSE(Dense(cfg).runs_on_device());
  });
}

TEST(DeviceStep, DenseSumsEveryValue) {
  comm::run_local(3, [&](comm::Communicator& c) {
    auto cfg = config(777, 3, c.rank(), 1.0,
                      {sparsifiers::Controller::kPaper, sparsifiers::Balance::kPaper, 0});
    Dense dense(cfg);
    ASSERT_TRUE(dense.runs_on_device());
    std::vector<float> acc(777);
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<float>(i % 13 + c.rank());
    test::HostDeviceStep device;
    StepStats s;
    s.n_g = 777;
    dense.step_device(acc.data(), device, c, s);
    ASSERT_TRUE(device.dense());
    for (std::size_t i = 0; i < acc.size(); ++i)
      ASSERT_EQ(device.sums()[i], static_cast<float>(3 * (i % 13) + 3)) << i;
    EXPECT_EQ(s.density, 1.0);
    EXPECT_EQ(s.k_per_worker, std::vector<std::int64_t>(3, 777));
  });
}
