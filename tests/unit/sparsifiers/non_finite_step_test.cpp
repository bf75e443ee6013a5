// non_finite = skip (non_finite_step.hpp): a NaN or Inf on one rank reaches every rank as a NaN
// update, and no rank's residual, velocity, iteration or threshold changes; the next step goes on
// as if the skipped one had not happened. non_finite = raise refuses it, naming the element.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "unit/expect_error.hpp"

namespace exdyna::sparsifiers {
namespace {

constexpr std::int64_t kN = 4096;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> gradient(int rank, int t) {
  std::vector<float> g(kN);
  for (std::int64_t i = 0; i < kN; ++i)
    g[i] = std::sin(0.37f * static_cast<float>(i * (rank + 2) + 11 * t)) *
           (1.0f + static_cast<float>((i * 13 + t) % 97));
  return g;
}

SparsifierConfig skip_config(double momentum) {
  SparsifierConfig c;
  c.density = 0.02;
  c.convergence.non_finite = NonFinite::kSkip;
  c.convergence.momentum_correction = momentum;
  return c;
}

// What a rank holds after each of its steps.
struct Held {
  std::vector<float> update, residual, velocity;
  std::int64_t iteration = 0, non_finite = 0, k_total = 0;
};

// Two ranks run steps 0..3 of `name`; at step 2 (when poison) rank 1's gradient holds an Inf at
// element 5 (and a NaN at 9). Returns per rank what it held after each step.
std::vector<std::vector<Held>> run(const std::string& name, double momentum, bool poison) {
  std::vector<std::vector<Held>> held(2);
  comm::run_local(2, [&](comm::Communicator& c) {
    auto ef = make_error_feedback(name, skip_config(momentum), kN, 2, c.rank(), builtin_registry());
    for (int t = 0; t < 4; ++t) {
      auto g = gradient(c.rank(), t);
      if (poison && t == 2 && c.rank() == 1) g[5] = kInf, g[9] = std::nanf("");
      if (!poison && t == 2) continue;  // the reference run never sees step 2
      const auto stats = ef.step(g, c);
      Held h{g,
             {ef.residual().begin(), ef.residual().end()},
             {ef.velocity().begin(), ef.velocity().end()},
             ef.iteration(),
             stats.non_finite,
             stats.k_total};
      held[static_cast<std::size_t>(c.rank())].push_back(std::move(h));
    }
  });
  return held;
}

class NonFiniteSkip : public ::testing::TestWithParam<std::tuple<std::string, double>> {};

TEST_P(NonFiniteSkip, EveryRankGetsNanAndKeepsItsState) {
  const auto& [name, momentum] = GetParam();
  const auto poisoned = run(name, momentum, true);
  const auto reference = run(name, momentum, false);
  for (int r = 0; r < 2; ++r) {
    const auto& p = poisoned[static_cast<std::size_t>(r)];
    const auto& ref = reference[static_cast<std::size_t>(r)];
    ASSERT_EQ(p.size(), 4u);
    ASSERT_EQ(ref.size(), 3u);
    // The skipped step: NaN everywhere on every rank, nothing sent, the iteration not counted.
    EXPECT_EQ(p[2].non_finite, 1) << "rank " << r;
    EXPECT_EQ(p[2].k_total, 0) << "rank " << r;
    for (const float u : p[2].update) ASSERT_TRUE(std::isnan(u)) << "rank " << r;
    EXPECT_EQ(p[2].iteration, p[1].iteration);
    // The step after goes on as the reference's step 2 (which never saw the skipped one), to
    // that rounding: same iteration, a finite update, the same number of values sent.
    EXPECT_EQ(p[3].non_finite, 0);
    EXPECT_EQ(p[3].iteration, ref[2].iteration);
    EXPECT_EQ(p[3].k_total, ref[2].k_total) << name;
    for (const float u : p[3].update) ASSERT_TRUE(std::isfinite(u));
    // With momentum correction the gradient is checked before anything changes: velocity and
    // residual exactly as before. Without, the residual to the rounding of one add and subtract,
    // and exactly at rank 1's poisoned elements.
    EXPECT_EQ(p[2].velocity, p[1].velocity);
    if (momentum > 0) {
      EXPECT_EQ(p[2].residual, p[1].residual);
      EXPECT_EQ(p[3].update, ref[2].update) << "the next step differs from the reference's";
      continue;
    }
    for (std::int64_t i = 0; i < kN; ++i) {
      const float before = p[1].residual[i], after = p[2].residual[i];
      if (r == 1 && (i == 5 || i == 9)) {
        EXPECT_EQ(after, before) << "a non-finite element's residual changed";
        continue;
      }
      const float g = std::fabs(gradient(r, 2)[i]);
      ASSERT_NEAR(after, before, 1e-6f * (std::fabs(before) + g)) << "rank " << r << " i " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sparsifiers, NonFiniteSkip,
                         ::testing::Values(std::tuple<std::string, double>{"exdyna", 0.0},
                                           std::tuple<std::string, double>{"exdyna", 0.9},
                                           std::tuple<std::string, double>{"topk", 0.0},
                                           std::tuple<std::string, double>{"dense", 0.0}));

TEST(NonFiniteRaise, IsTheDefaultAndNamesTheElement) {
  SparsifierConfig c;
  c.density = 0.02;
  ASSERT_EQ(c.convergence.non_finite, NonFinite::kRaise);
  comm::run_local(1, [&](comm::Communicator& comm) {
    auto ef = make_error_feedback("exdyna", c, kN, 1, 0, builtin_registry());
    auto g = gradient(0, 0);
    g[7] = kInf;
    expect_error<DataError>([&] { ef.step(g, comm); },
                            {"gradient element 7 of iteration 0 on rank 0", "finite"});
  });
}

TEST(NonFiniteRaise, AnOverflowingSumIsNamedAndTheResidualKept) {
  // Both finite, their sum not: refused naming the element, and the residual as before the step.
  SparsifierConfig c;
  c.density = 0.02;
  comm::run_local(1, [&](comm::Communicator& comm) {
    auto ef = make_error_feedback("exdyna", c, kN, 1, 0, builtin_registry());
    auto g0 = gradient(0, 0);
    ef.step(g0, comm);
    ef.mutable_residual()[11] = 3e38f;
    const std::vector<float> before(ef.residual().begin(), ef.residual().end());
    auto g = gradient(0, 1);
    g[11] = 3e38f;
    expect_error<DataError>([&] { ef.step(g, comm); },
                            {"gradient element 11 of iteration 1", "accumulated inf"});
    for (std::int64_t i = 0; i < kN; ++i)
      ASSERT_NEAR(ef.residual()[i], before[i], 1e-6f * (std::fabs(before[i]) + std::fabs(g[i])))
          << i;
    EXPECT_EQ(ef.residual()[11], 3e38f);
  });
}

TEST(NonFiniteOption, ParsesItsTwoValuesAndRefusesOthers) {
  EXPECT_EQ(parse_non_finite("skip"), NonFinite::kSkip);
  EXPECT_EQ(parse_non_finite("raise"), NonFinite::kRaise);
  EXPECT_STREQ(to_string(NonFinite::kSkip), "skip");
  expect_error<InvalidArgument>([] { parse_non_finite("ignore"); },
                                {"non_finite 'ignore'", "raise", "skip"});
}

}  // namespace
}  // namespace exdyna::sparsifiers
