// The convergence mechanisms around error feedback (momentum correction and masking, local
// clipping, step clipping, density warm-up) against references computed here, on 2 ranks of the
// in-process group.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/density_warmup.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/sparsifiers/local_clipping.hpp"
#include "exdyna/sparsifiers/step_clipping.hpp"
#include "unit/expect_error.hpp"

namespace exdyna::sparsifiers {
namespace {

constexpr std::int64_t kN = 16;

// Rank r's gradient at step t: distinct magnitudes, so every top-k is unique.
float grad_of(int r, std::int64_t i, int t) {
  const float sign = ((i + t) % 3 == 0) ? -1.0f : 1.0f;
  return sign * (0.1f + 0.37f * static_cast<float>((i * 7 + t * 5 + r * 3) % kN));
}

SparsifierConfig config(double density) {
  SparsifierConfig c;
  c.density = density;
  return c;
}

// What one rank saw at one step: its velocity and accumulated value before the exchange (the
// reference's), and what error feedback returned and kept.
struct Seen {
  std::vector<float> acc, update, residual, velocity;
  std::vector<Index> sent;
  bool dense = false;
  double density = 0;
  double step_scale = 0;
};

// Runs `steps` steps of `name` with the options on 2 ranks; each rank also keeps the reference
// u <- m u + g, acc = residual + u, computed here from the previous step's kept state.
std::vector<std::vector<Seen>> run(const std::string& name, const SparsifierConfig& options,
                                   int steps) {
  std::vector<std::vector<Seen>> seen(2, std::vector<Seen>(static_cast<std::size_t>(steps)));
  const float m = static_cast<float>(options.convergence.momentum_correction);
  comm::run_local(2, [&](comm::Communicator& c) {
    auto ef = make_error_feedback(name, options, kN, 2, c.rank(), builtin_registry());
    std::vector<float> u(kN, 0.0f), grad(kN);
    for (int t = 0; t < steps; ++t) {
      auto& s = seen[static_cast<std::size_t>(c.rank())][static_cast<std::size_t>(t)];
      s.acc.resize(kN);
      for (std::int64_t i = 0; i < kN; ++i) {
        grad[i] = grad_of(c.rank(), i, t);
        u[i] = m * u[i] + grad[i];
        s.acc[i] = ef.residual()[i] + u[i];
      }
      const auto stats = ef.step(grad, c);
      s.update = grad;
      s.residual.assign(ef.residual().begin(), ef.residual().end());
      s.velocity.assign(ef.velocity().begin(), ef.velocity().end());
      s.sent = ef.last_result().indices;
      s.dense = ef.last_result().dense;
      s.density = stats.target_density;
      s.step_scale = stats.step_scale;
      u.assign(s.velocity.begin(), s.velocity.end());  // the next step starts from what was kept
      if (m == 0) std::fill(u.begin(), u.end(), 0.0f);
    }
  });
  return seen;
}

// Indices of the k largest |acc|.
std::set<Index> top(const std::vector<float>& acc, std::size_t k) {
  std::vector<Index> idx(acc.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<Index>(i);
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](Index a, Index b) { return std::fabs(acc[a]) > std::fabs(acc[b]); });
  return {idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k)};
}

TEST(MomentumCorrection, EqualsAHandComputedReferenceOnTwoRanks) {
  auto opt = config(0.125);  // k = 2 of 16
  opt.convergence.momentum_correction = 0.9;
  const auto seen = run("topk", opt, 6);
  for (int t = 0; t < 6; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const auto& a = seen[0][static_cast<std::size_t>(t)];
    const auto& b = seen[1][static_cast<std::size_t>(t)];
    // Top-k's set: the union of each rank's top 2 of its accumulated velocity.
    std::set<Index> want = top(a.acc, 2);
    for (const Index i : top(b.acc, 2)) want.insert(i);
    ASSERT_EQ(std::set<Index>(a.sent.begin(), a.sent.end()), want);
    for (std::int64_t i = 0; i < kN; ++i) {
      const bool sent = want.count(static_cast<Index>(i)) > 0;
      const float mean = (a.acc[i] + b.acc[i]) / 2;
      EXPECT_FLOAT_EQ(a.update[i], sent ? mean : 0.0f) << "update at " << i;
      EXPECT_FLOAT_EQ(b.update[i], a.update[i]) << "ranks differ at " << i;
      for (const auto* s : {&a, &b}) {
        // Masking: the velocity of a sent value is gone; the rest keeps its momentum.
        const std::size_t r = s == &a ? 0 : 1;
        const float u_ref = 0.9f * (t ? seen[r][t - 1].velocity[i] : 0.0f) + grad_of(int(r), i, t);
        EXPECT_FLOAT_EQ(s->velocity[i], sent ? 0.0f : u_ref) << "velocity at " << i;
        EXPECT_FLOAT_EQ(s->residual[i], sent ? 0.0f : s->acc[i]) << "residual at " << i;
      }
    }
  }
}

TEST(MomentumCorrection, ADenseWarmUpStepIsMomentumSgdUnmasked) {
  auto opt = config(0.125);
  opt.convergence.momentum_correction = 0.5;
  opt.convergence.warmup_steps = 8;  // steps 0-1 dense (start 1), 2-7 in between, then d
  opt.convergence.warmup_start = 1.0;
  const auto seen = run("topk", opt, 2);
  for (int t = 0; t < 2; ++t) {
    const auto& a = seen[0][static_cast<std::size_t>(t)];
    const auto& b = seen[1][static_cast<std::size_t>(t)];
    ASSERT_TRUE(a.dense);
    EXPECT_EQ(a.density, 1.0);
    for (std::int64_t i = 0; i < kN; ++i) {
      // u_t = 0.5 u_{t-1} + g_t on each rank; the update is their mean; nothing is masked.
      const float u0 = 0.5f * (t ? seen[0][0].velocity[i] : 0.0f) + grad_of(0, i, t);
      const float u1 = 0.5f * (t ? seen[1][0].velocity[i] : 0.0f) + grad_of(1, i, t);
      EXPECT_FLOAT_EQ(a.velocity[i], u0);
      EXPECT_FLOAT_EQ(b.velocity[i], u1);
      EXPECT_FLOAT_EQ(a.update[i], (u0 + u1) / 2);
      EXPECT_EQ(a.residual[i], 0.0f);
    }
  }
}

TEST(DensityWarmup, FourGeometricPhasesFromStartDownToTheTarget) {
  const double s = 0.25, d = 0.001;
  const double r = std::pow(d / s, 0.25);
  const double want[] = {s, s, s * r, s * r, s * r * r, s * r * r, s * r * r * r, s * r * r * r,
                         d, d};
  for (int t = 0; t < 10; ++t)
    EXPECT_NEAR(warmup_density(t, 8, s, d), want[t], 1e-15) << "step " << t;
  EXPECT_EQ(warmup_density(0, 0, s, d), d);  // off
  // Phases of unequal length when 4 does not divide the steps: floor(4 t / 10).
  EXPECT_EQ(warmup_density(2, 10, s, d), s);
  EXPECT_NEAR(warmup_density(3, 10, s, d), s * r, 1e-15);
}

TEST(DensityWarmup, ErrorFeedbackStepsAtThePhaseDensityAndResumesIntoIt) {
  auto opt = config(0.125);
  opt.convergence.warmup_steps = 4;
  opt.convergence.warmup_start = 0.5;
  const auto seen = run("topk", opt, 6);
  for (int t = 0; t < 6; ++t)
    EXPECT_DOUBLE_EQ(seen[0][t].density, warmup_density(t, 4, 0.5, 0.125)) << "step " << t;
  // A resumed error feedback is in the phase of its iteration.
  comm::run_local(1, [&](comm::Communicator& c) {
    auto ef = make_error_feedback("topk", opt, kN, 1, 0, builtin_registry());
    ef.set_iteration(2);
    EXPECT_DOUBLE_EQ(ef.phase_density(), warmup_density(2, 4, 0.5, 0.125));
    std::vector<float> g(kN, 1.0f);
    EXPECT_DOUBLE_EQ(ef.step(g, c).target_density, warmup_density(2, 4, 0.5, 0.125));
  });
}

TEST(LocalClipping, ScalesToClipOverRootNAndLeavesSmallerNorms) {
  std::vector<float> g = {3.0f, 4.0f};             // norm 5
  EXPECT_DOUBLE_EQ(clip_locally(g, 4.0, 4), 0.4);  // limit 4 / sqrt(4) = 2
  EXPECT_FLOAT_EQ(g[0], 1.2f);
  EXPECT_FLOAT_EQ(g[1], 1.6f);
  EXPECT_EQ(clip_locally(g, 4.0, 1), 1.0);  // norm 2 < 4: unchanged
  EXPECT_FLOAT_EQ(g[1], 1.6f);
  EXPECT_EQ(clip_locally(g, 0.0, 1), 1.0);  // off
}

TEST(StepClipping, ScalesAnUpdateToTheClipAndLeavesShorterOnes) {
  const std::vector<float> summed = {6.0f, 8.0f};            // update (summed / 2): norm 5
  EXPECT_DOUBLE_EQ(step_clip_scale(summed, 0.5, 1.0), 0.2);  // to norm 1
  EXPECT_EQ(step_clip_scale(summed, 0.5, 5.0), 1.0);         // at the limit: unchanged
  EXPECT_EQ(step_clip_scale(summed, 0.5, 0.0), 1.0);         // off
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(step_clip_scale(nan, 1.0, 1.0), 1.0);  // not finite: left to non_finite
}

double norm(const std::vector<float>& v) {
  double sq = 0;
  for (const float x : v) sq += static_cast<double>(x) * x;
  return std::sqrt(sq);
}

// The gradients here do not depend on the update, so a clipped run selects what an unclipped one
// does: the update is the unclipped one times s, and the residual is the unclipped one (the part
// clipped off is dropped, not kept).
TEST(StepClipping, TheUpdateIsScaledOnEveryRankAndTheClippedPartDropped) {
  const auto plain = run("topk", config(0.125), 5);
  auto clipped_opt = config(0.125);
  clipped_opt.convergence.step_clip = 0.5;  // below every step's update norm here
  const auto clipped = run("topk", clipped_opt, 5);
  auto loose_opt = config(0.125);
  loose_opt.convergence.step_clip = 1e6;
  const auto loose = run("topk", loose_opt, 5);
  for (std::size_t t = 0; t < 5; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const auto& p = plain[0][t];
    const double want = 0.5 / norm(p.update);
    ASSERT_LT(want, 1.0);
    for (std::size_t r = 0; r < 2; ++r) {
      const auto& c = clipped[r][t];
      EXPECT_DOUBLE_EQ(c.step_scale, want);
      EXPECT_NEAR(norm(c.update), 0.5, 1e-6);
      EXPECT_EQ(c.sent, plain[r][t].sent);
      EXPECT_EQ(c.residual, plain[r][t].residual);
      for (std::int64_t i = 0; i < kN; ++i)
        EXPECT_FLOAT_EQ(c.update[i], static_cast<float>(want) * p.update[i]) << "at " << i;
      EXPECT_EQ(loose[r][t].update, plain[r][t].update);  // under the clip: bit for bit
      EXPECT_EQ(loose[r][t].step_scale, 1.0);
    }
  }
}

TEST(MomentumCorrection, ANonFiniteGradientIsRefusedAndLeavesTheVelocity) {
  auto opt = config(0.125);
  opt.convergence.momentum_correction = 0.9;
  comm::run_local(1, [&](comm::Communicator& c) {
    auto ef = make_error_feedback("topk", opt, kN, 1, 0, builtin_registry());
    std::vector<float> g(kN, 1.0f);
    ef.step(g, c);
    const std::vector<float> before(ef.velocity().begin(), ef.velocity().end());
    std::fill(g.begin(), g.end(), 1.0f);
    g[5] = std::numeric_limits<float>::infinity();
    expect_error<DataError>([&] { ef.step(g, c); }, {"gradient element 5", "inf"});
    EXPECT_EQ(std::vector<float>(ef.velocity().begin(), ef.velocity().end()), before);
  });
}

TEST(ConvergenceOptions, BadValuesAreRefusedByName) {
  auto bad = config(0.01);
  bad.n_g = 1000;
  bad.convergence.momentum_correction = 1.0;
  expect_error<InvalidArgument>([&] { bad.validate(); }, {"--momentum-correction", "[0, 1)"});
  bad.convergence = {};
  bad.convergence.warmup_steps = 10;
  bad.convergence.warmup_start = 0.01;
  expect_error<InvalidArgument>([&] { bad.validate(); }, {"--warmup-start 0.01", "(d, 1]"});
  bad.convergence = {};
  bad.convergence.local_clip = -1;
  expect_error<InvalidArgument>([&] { bad.validate(); }, {"--local-clip -1"});
  bad.convergence = {};
  bad.convergence.step_clip = std::numeric_limits<double>::infinity();
  expect_error<InvalidArgument>([&] { bad.validate(); }, {"--step-clip inf", "finite norm"});
}

}  // namespace
}  // namespace exdyna::sparsifiers
