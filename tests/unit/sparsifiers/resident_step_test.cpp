// ExDyna's resident step (a step that stays on the device, resident_step.hpp) takes step()'s
// decisions with the fused all-gather: the same list and sums in every iteration, and, one step
// late, the same threshold, counts, partitions and state, on 1 to 4 ranks, with exact and
// paper balance, here with the host's ResidentStep (host_resident_step.hpp: the CPU's selection
// and the device's own plan and list functions). Also: what it refuses, and the state it will not
// save while a step is pending.
#include <gtest/gtest.h>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "unit/sparsifiers/device_path_checks.hpp"
#include "unit/sparsifiers/host_resident_step.hpp"
#include "unit/sparsifiers/layered_gradient.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

SparsifierConfig config(std::int64_t n_g, int n, int rank, double d, Balance balance, Fuse fuse) {
  SparsifierConfig c = test::device_path_config(n_g, n, rank, d);
  c.exdyna.controller = Controller::kExact;
  c.exdyna.balance = balance;
  c.exdyna.worker_cap = ExDynaOptions::kAutoCap;
  c.exdyna.fuse = fuse;
  return c;
}

void expect_same_stats(const StepStats& a, const StepStats& b) {
  test::expect_same_decisions(a, b);
  EXPECT_EQ(a.k_total, b.k_total);
  EXPECT_EQ(a.own_candidates, b.own_candidates);
  EXPECT_EQ(a.padded_elements, b.padded_elements);
  EXPECT_EQ(a.fused, b.fused);
}

// step() (fused) and step_resident side by side on every rank, each with its own residual;
// iteration 0 is step() on both (the cold ladder).
void run_both(int n, std::int64_t n_g, double d, Balance balance, int steps) {
  comm::run_local(n, [&](comm::Communicator& c) {
    const int r = c.rank();
    ExDyna host(config(n_g, n, r, d, balance, Fuse::kOn));
    ExDyna res(config(n_g, n, r, d, balance, Fuse::kOn));
    ASSERT_TRUE(res.runs_resident());
    test::HostResidentStep device;
    std::vector<float> g(static_cast<std::size_t>(n_g)), res_h(g.size()), res_d(g.size());
    std::vector<float> acc_h(g.size()), acc_d(g.size());
    SparseResult out, out_d;
    StepStats last_host;  // the host's statistics of the step the resident one finishes next
    for (int t = 0; t < steps; ++t) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << " iteration " << t);
      test::fill_layered_gradient(g, r, t);
      for (std::size_t i = 0; i < g.size(); ++i) {
        acc_h[i] = res_h[i] + g[i];
        acc_d[i] = res_d[i] + g[i];
      }
      StepStats sh, sd;
      host.step(acc_h, c, out, sh);
      res_h = acc_h;
      for (const auto i : out.indices) res_h[i] = 0;
      if (t == 0) {
        res.step(acc_d, c, out_d, sd);
        ASSERT_EQ(out_d.indices, out.indices);
        res_d = acc_d;
        for (const auto i : out_d.indices) res_d[i] = 0;
        last_host = sh;
        continue;
      }
      res.step_resident(acc_d.data(), device, c, sd);
      if (t >= 2) expect_same_stats(last_host, sd);  // iteration t - 1, finished now
      last_host = sh;
      EXPECT_TRUE(res.resident_pending());
      ASSERT_EQ(device.listed(), static_cast<std::int64_t>(out.indices.size()));
      res_d = acc_d;
      for (std::size_t j = 0; j < out.indices.size(); ++j) {
        ASSERT_EQ(device.list()[j], out.indices[j]) << "list entry " << j;
        ASSERT_EQ(device.sums()[j], out.values[j]) << "sum " << j;
        res_d[device.list()[j]] = 0;
      }
      for (std::int64_t j = device.listed(); j < res.k(); ++j) {
        ASSERT_EQ(device.list()[j], static_cast<Index>(n_g)) << "padding " << j;
        ASSERT_EQ(device.sums()[j], 0.0f) << "padding's sum " << j;
      }
    }
    StepStats sd;
    res.finish_resident(device, sd);
    expect_same_stats(last_host, sd);
    EXPECT_FALSE(res.resident_pending());
    EXPECT_EQ(device.yields(), 0);  // no cap yielded: the two paths' rules agree throughout
    EXPECT_EQ(device.posted(), steps - 1);
    EXPECT_EQ(device.waited(), steps - 1);
    EXPECT_EQ(host.threshold(), res.threshold());
    EXPECT_EQ(host.iteration(), res.iteration());
    EXPECT_EQ(host.save_state(), res.save_state());
  });
}

}  // namespace

class ResidentStepWorkers : public ::testing::TestWithParam<int> {};

TEST_P(ResidentStepWorkers, TakesTheFusedStepsDecisionsWithExactBalance) {
  run_both(GetParam(), 60'000, 0.01, Balance::kExact, 24);
}

TEST_P(ResidentStepWorkers, TakesTheFusedStepsDecisionsWithPaperBalance) {
  run_both(GetParam(), 30'011, 0.005, Balance::kPaper, 20);
}

// (One rank: no worker cap, a slot of k; the plain step's exchange.)
INSTANTIATE_TEST_SUITE_P(Workers, ResidentStepWorkers, ::testing::Values(1, 2, 3, 4));

TEST(ResidentStep, RefusesWhatItDoesNotRunAndPendingStates) {
  comm::run_local(2, [&](comm::Communicator& c) {
    const int r = c.rank();
    test::HostResidentStep device;
    std::vector<float> acc(1000);
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<float>((i * 37 + r) % 101);
    StepStats s;
    // No cap, or no fused all-gather: the resident step needs the fused slots.
    SparsifierConfig none = config(1000, 2, r, 0.01, Balance::kExact, Fuse::kOn);
    none.exdyna.worker_cap = 0;
    none.exdyna.fuse = Fuse::kAuto;  // (--fuse on is refused without a cap)
    ExDyna uncapped(none);
    EXPECT_FALSE(uncapped.runs_resident());
    EXPECT_THROW(uncapped.step_resident(acc.data(), device, c, s), InvalidArgument);
    ExDyna unfused(config(1000, 2, r, 0.01, Balance::kExact, Fuse::kOff));
    EXPECT_FALSE(unfused.runs_resident());
    // Iteration 0 (the cold ladder) is step()'s or step_device's.
    ExDyna x(config(1000, 2, r, 0.01, Balance::kExact, Fuse::kOn));
    ASSERT_TRUE(x.runs_resident());
    EXPECT_THROW(x.step_resident(acc.data(), device, c, s), InvalidArgument);
    SparseResult out;
    x.step(acc, c, out, s);
    x.step_resident(acc.data(), device, c, s);
    EXPECT_EQ(s.k_total, 0);  // nothing was pending: no statistics yet
    ASSERT_TRUE(x.resident_pending());
    // Pending: no state saved or loaded, no other step.
    EXPECT_THROW(static_cast<void>(x.save_state()), InvalidArgument);
    EXPECT_THROW(x.step(acc, c, out, s), InvalidArgument);
    x.finish_resident(device, s);
    EXPECT_FALSE(x.resident_pending());
    EXPECT_EQ(s.k_total, x.k());
    EXPECT_EQ(x.iteration(), 2);
    EXPECT_NO_THROW(static_cast<void>(x.save_state()));
  });
}
