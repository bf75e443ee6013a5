// Cross-sparsifier tests: every name in builtin_registry(), on the in-process group, world sizes
// 1..16 and awkward n_g. Gradients come from a fixture whose value encodes (rank, index, step), so
// each worker's acc, and the expected mean update, have closed forms computed here independently.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/registry.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

// Worker w's gradient at index i, step t: magnitudes spread over (0, 0.25] with a mix of signs
// and a few large outliers that depend on (w, i, t), so workers select partly different indices.
float fixture_grad(int w, std::int64_t i, int t) {
  const auto h = static_cast<std::uint64_t>(i * 37 + w * 101 + t * 53);
  float m = static_cast<float>(h % 97 + 1) / 388.0f;
  if ((static_cast<std::uint64_t>(i) * 2654435761u + static_cast<std::uint64_t>(w) * 40503u +
       static_cast<std::uint64_t>(t) * 977u) %
          23 ==
      0)
    m += 1.0f + static_cast<float>(w);
  return ((i + w + t) % 3 == 0) ? -m : m;
}

SparsifierConfig make_config(std::int64_t n_g, int n, int rank, double density,
                             comm::GatherMode mode = comm::GatherMode::kPadded) {
  SparsifierConfig c;
  c.n_g = n_g;
  c.world_size = n;
  c.rank = rank;
  c.density = density;
  c.gather_mode = mode;
  return c;
}

std::vector<std::string> all_names() {
  return builtin_registry().names();
}

// What one rank saw in one step.
struct StepRecord {
  std::vector<float> acc;       // residual + grad, before the step
  std::vector<float> update;    // grad on exit: the mean update
  std::vector<float> residual;  // after the step
  SparseResult result;
  StepStats stats;
};

// The set of indices a result covers (all of them for a dense result).
std::vector<char> in_set_mask(const SparseResult& r, std::int64_t n_g) {
  std::vector<char> m(static_cast<std::size_t>(n_g), 0);
  if (r.dense) {
    std::fill(m.begin(), m.end(), 1);
  } else {
    for (auto i : r.indices) m[i] = 1;
  }
  return m;
}

// Where a rank's acc went into the result: every gathered index, or (Ok-Topk, a partial result)
// the indices it sent, a subset of them.
std::vector<char> sent_mask(const SparseResult& r, std::int64_t n_g) {
  if (!r.partial) return in_set_mask(r, n_g);
  std::vector<char> m(static_cast<std::size_t>(n_g), 0);
  for (auto i : r.sent) m[i] = 1;
  return m;
}

struct Case {
  std::string name;
  int world;
  std::int64_t n_g;
  comm::GatherMode mode;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name << " on " << c.world << " workers, n_g " << c.n_g << ", "
      << comm::to_string(c.mode);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::ostringstream os;
  for (char ch : info.param.name) os << (ch == '-' ? '_' : ch);
  os << "_n" << info.param.world << "_g" << info.param.n_g << "_"
     << comm::to_string(info.param.mode);
  return os.str();
}

std::vector<Case> all_cases() {
  std::vector<Case> out;
  // n_g below 32 * n_b, prime, not a multiple of 32, one just above 32 * 1024.
  const std::int64_t sizes[] = {37, 97, 1009, 32771};
  for (const auto& name : all_names())
    for (int n = 1; n <= 16; ++n)
      for (auto g : sizes) {
        // The largest size on a few world sizes only, to keep the suite fast.
        if (g == 32771 && n != 1 && n != 7 && n != 16) continue;
        const auto mode = (n % 2 == 0) ? comm::GatherMode::kExact : comm::GatherMode::kPadded;
        out.push_back({name, n, g, mode});
      }
  return out;
}

class EveryStep : public ::testing::TestWithParam<Case> {};

// Error feedback loses nothing and every worker applies the same update, the mean over workers
// of acc at the gathered indices; every rank returns identical results.
TEST_P(EveryStep, ErrorFeedbackLosesNothingAndRanksAgree) {
  const Case& cs = GetParam();
  const int n = cs.world;
  const std::int64_t n_g = cs.n_g;
  constexpr int kSteps = 4;
  const double density = 0.1;
  std::vector<std::vector<StepRecord>> rec(static_cast<std::size_t>(n),
                                           std::vector<StepRecord>(kSteps));

  comm::run_local(n, [&](comm::Communicator& c) {
    const int r = c.rank();
    auto sp = builtin_registry().make(cs.name, make_config(n_g, n, r, density, cs.mode));
    ErrorFeedback ef(std::move(sp), n_g);
    std::vector<float> grad(static_cast<std::size_t>(n_g));
    for (int t = 0; t < kSteps; ++t) {
      auto& R = rec[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)];
      R.acc.resize(grad.size());
      for (std::int64_t i = 0; i < n_g; ++i) {
        const auto u = static_cast<std::size_t>(i);
        grad[u] = fixture_grad(r, i, t);
        R.acc[u] = ef.residual()[u] + grad[u];
      }
      R.stats = ef.step(grad, c);
      R.update = grad;
      R.residual.assign(ef.residual().begin(), ef.residual().end());
      R.result = ef.last_result();
    }
  });

  for (int t = 0; t < kSteps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const auto& R0 = rec[0][static_cast<std::size_t>(t)];
    const auto mask = in_set_mask(R0.result, n_g);
    if (!R0.result.dense) {
      std::set<Index> uniq(R0.result.indices.begin(), R0.result.indices.end());
      EXPECT_EQ(uniq.size(), R0.result.indices.size()) << "gathered indices hold duplicates";
      for (auto i : R0.result.indices) ASSERT_LT(i, static_cast<Index>(n_g));
      EXPECT_EQ(R0.stats.k_unique, static_cast<std::int64_t>(R0.result.indices.size()));
    }
    ASSERT_EQ(R0.stats.k_per_worker.size(), static_cast<std::size_t>(n));
    std::int64_t ksum = 0;
    for (auto k : R0.stats.k_per_worker) {
      EXPECT_GE(k, 0);
      ksum += k;
    }
    EXPECT_EQ(R0.stats.k_total, ksum);
    EXPECT_LE(R0.stats.k_unique, R0.stats.k_total);
    if (!R0.result.dense) {  // dense reports k = n_g: it sends everything
      EXPECT_EQ(R0.stats.k_target,
                static_cast<std::int64_t>(std::floor(density * static_cast<double>(n_g))));
    }

    for (int r = 0; r < n; ++r) {
      const auto& R = rec[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)];
      // Identical on every rank.
      EXPECT_EQ(R.result.dense, R0.result.dense) << "rank " << r;
      EXPECT_EQ(R.result.indices, R0.result.indices) << "rank " << r;
      EXPECT_EQ(R.result.values, R0.result.values) << "rank " << r;
      EXPECT_EQ(R.update, R0.update) << "rank " << r;
      EXPECT_EQ(R.stats.k_per_worker, R0.stats.k_per_worker) << "rank " << r;
      EXPECT_EQ(R.stats.k_unique, R0.stats.k_unique) << "rank " << r;
      // residual + sent part = acc, element by element (sent part: acc at the gathered indices,
      // or for a partial result at the ones this rank sent, all of them gathered).
      const auto own = sent_mask(R.result, n_g);
      for (std::int64_t i = 0; i < n_g; ++i) {
        const auto u = static_cast<std::size_t>(i);
        ASSERT_TRUE(!own[u] || mask[u]) << "rank " << r << " sent " << i << ", not gathered";
        const float sent = own[u] ? R.acc[u] : 0.0f;
        ASSERT_EQ(R.residual[u] + sent, R.acc[u]) << "rank " << r << " element " << i;
        if (own[u]) {
          ASSERT_EQ(R.residual[u], 0.0f) << "rank " << r << " element " << i;
        }
      }
    }
    // The update: mean over workers of acc at the gathered indices (of the workers that sent
    // it), 0 elsewhere.
    std::vector<std::vector<char>> own(static_cast<std::size_t>(n));
    for (int w = 0; w < n; ++w)
      own[static_cast<std::size_t>(w)] =
          sent_mask(rec[static_cast<std::size_t>(w)][static_cast<std::size_t>(t)].result, n_g);
    for (std::int64_t i = 0; i < n_g; ++i) {
      const auto u = static_cast<std::size_t>(i);
      double sum = 0, mag = 0;
      for (int w = 0; w < n; ++w) {
        if (own[static_cast<std::size_t>(w)][u])
          sum += rec[static_cast<std::size_t>(w)][static_cast<std::size_t>(t)].acc[u];
        mag += std::fabs(rec[static_cast<std::size_t>(w)][static_cast<std::size_t>(t)].acc[u]);
      }
      const double expected = mask[u] ? sum / n : 0.0;
      ASSERT_NEAR(R0.update[u], expected, 1e-6 * mag + 1e-12) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSparsifiers, EveryStep, ::testing::ValuesIn(all_cases()), case_name);

// Runs `steps` steps with grad_of(rank, index, step) and returns rank 0's stats per step.
template <typename GradFn>
std::vector<StepStats> run_steps(const std::string& name, int n, std::int64_t n_g, double density,
                                 int steps, GradFn grad_of, SparsifierConfig base = {}) {
  std::vector<StepStats> out(static_cast<std::size_t>(steps));
  comm::run_local(n, [&](comm::Communicator& c) {
    SparsifierConfig cfg = base;
    cfg.n_g = n_g;
    cfg.world_size = n;
    cfg.rank = c.rank();
    cfg.density = density;
    ErrorFeedback ef(builtin_registry().make(name, cfg), n_g);
    std::vector<float> grad(static_cast<std::size_t>(n_g));
    for (int t = 0; t < steps; ++t) {
      for (std::int64_t i = 0; i < n_g; ++i)
        grad[static_cast<std::size_t>(i)] = grad_of(c.rank(), i, t);
      auto st = ef.step(grad, c);
      if (c.rank() == 0) out[static_cast<std::size_t>(t)] = st;
    }
  });
  return out;
}

// The same gradient on every worker: everyone who selects independently picks the same indices.
float shared_grad(int, std::int64_t i, int t) {
  return fixture_grad(0, i, t);
}

TEST(BuildUp, TopKAndHardThresholdSelectOneIndexOnSeveralWorkers) {
  for (const std::string name : {"topk", "hard-threshold"}) {
    for (int n : {2, 3, 5, 8, 16}) {
      SCOPED_TRACE(name + " on " + std::to_string(n) + " workers");
      const auto stats = run_steps(name, n, 1009, 0.05, 3, shared_grad);
      for (const auto& st : stats) {
        ASSERT_GT(st.k_unique, 0);
        EXPECT_LT(st.k_unique, st.k_total) << "no index was selected by two workers";
        EXPECT_EQ(st.k_total, n * st.k_unique);  // identical inputs: identical lists
      }
    }
  }
}

TEST(BuildUp, CltKNeverSelectsOneIndexOnTwoWorkers) {
  for (int n : {1, 2, 3, 5, 8, 16}) {
    for (bool shared : {true, false}) {
      SCOPED_TRACE(std::to_string(n) + " workers, shared inputs " + std::to_string(shared));
      const auto stats = run_steps(
          "cltk", n, 1009, 0.05, 2 * n + 1,
          [&](int w, std::int64_t i, int t) { return fixture_grad(shared ? 0 : w, i, t); });
      for (std::size_t t = 0; t < stats.size(); ++t) {
        const auto& st = stats[t];
        EXPECT_EQ(st.k_unique, st.k_total);
        EXPECT_EQ(st.k_total, st.k_target);
        // Only the leader, t mod n, contributes indices.
        for (int w = 0; w < n; ++w)
          EXPECT_EQ(st.k_per_worker[static_cast<std::size_t>(w)],
                    w == static_cast<int>(t % static_cast<std::size_t>(n)) ? st.k_target : 0)
              << "worker " << w << " step " << t;
        EXPECT_EQ(st.f_t, 1.0);
        EXPECT_EQ(st.padded_elements, 0);
      }
    }
  }
}

// The collective calls of a step (StepStats::bytes.collectives), each a latency-bound round at
// least: the dense all-reduce is one; ExDyna's step is three (the counts, the indices, the
// values), the exact controller's cold first step one more (the largest |acc|, for its ladder).
TEST(Collectives, EachStepCountsItsCalls) {
  const auto grad = [](int w, std::int64_t i, int t) { return fixture_grad(w, i, t); };
  for (const auto& st : run_steps("dense", 4, 1009, 1.0, 3, grad))
    EXPECT_EQ(st.bytes.collectives, 1u);
  SparsifierConfig paper;
  paper.exdyna.controller = Controller::kPaper;
  paper.exdyna.balance = Balance::kPaper;
  for (const auto& st : run_steps("exdyna", 4, 20011, 0.01, 4, grad, paper))
    EXPECT_EQ(st.bytes.collectives, 3u) << "paper, step " << st.iteration;
  SparsifierConfig three;
  three.exdyna.fuse = Fuse::kOff;
  for (const auto& st : run_steps("exdyna", 4, 20011, 0.01, 4, grad, three))
    EXPECT_EQ(st.bytes.collectives, st.iteration == 0 ? 4u : 3u) << "exact, step " << st.iteration;
  // Fused (the default's path where it pays): counts and indices in one all-gather after the cold
  // step, except where the cap yields (here in steps 2 and 3: a worker's list holds the cap and
  // the plan gives it more), and the index all-gather follows.
  SparsifierConfig fused;
  fused.exdyna.fuse = Fuse::kOn;
  int fused_steps = 0;
  for (const auto& st : run_steps("exdyna", 4, 20011, 0.01, 4, grad, fused)) {
    EXPECT_EQ(st.bytes.collectives, st.iteration == 0 ? 4u
                                    : st.fused        ? 2u
                                                      : 3u)
        << "fused, step " << st.iteration;
    fused_steps += static_cast<int>(st.fused);
  }
  EXPECT_GE(fused_steps, 1);
}

TEST(CltK, SelectsTheLeadersTopKEachIteration) {
  const int n = 5;
  const std::int64_t n_g = 211;
  const double d = 0.05;  // k = 10
  std::vector<std::vector<Index>> got(7);
  comm::run_local(n, [&](comm::Communicator& c) {
    auto sp = builtin_registry().make("cltk", make_config(n_g, n, c.rank(), d));
    SparseResult res;
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    for (int t = 0; t < 7; ++t) {
      for (std::int64_t i = 0; i < n_g; ++i)
        acc[static_cast<std::size_t>(i)] = fixture_grad(c.rank(), i, t);
      StepStats st;
      sp->step(acc, c, res, st);
      if (c.rank() == 0) got[static_cast<std::size_t>(t)] = res.indices;
    }
  });
  for (int t = 0; t < 7; ++t) {
    const int lead = t % n;
    // Reference: sort the leader's acc by |value| desc, index asc; take 10; sort by index.
    std::vector<Index> order(static_cast<std::size_t>(n_g));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<Index>(i);
    std::stable_sort(order.begin(), order.end(), [&](Index a, Index b) {
      return std::fabs(fixture_grad(lead, a, t)) > std::fabs(fixture_grad(lead, b, t));
    });
    order.resize(10);
    std::sort(order.begin(), order.end());
    std::vector<Index> mine = got[static_cast<std::size_t>(t)];
    std::sort(mine.begin(), mine.end());
    EXPECT_EQ(mine, order) << "iteration " << t << ", leader " << lead;
  }
}

TEST(HardThreshold, UsesOneOverTwoRootKByDefault) {
  const auto stats = run_steps("hard-threshold", 3, 1009, 0.05, 1, fixture_grad);
  EXPECT_DOUBLE_EQ(stats[0].threshold, 1.0 / (2.0 * std::sqrt(50.0)));
  SparsifierConfig base;
  base.hard_threshold = 0.2;
  const auto s2 = run_steps("hard-threshold", 3, 1009, 0.05, 1, fixture_grad, base);
  EXPECT_DOUBLE_EQ(s2[0].threshold, 0.2);
  // Count on worker 0: every |g| >= 0.2f, from the fixture directly.
  std::int64_t expect0 = 0;
  for (std::int64_t i = 0; i < 1009; ++i)
    expect0 += std::fabs(fixture_grad(0, i, 0)) >= 0.2f ? 1 : 0;
  EXPECT_EQ(s2[0].k_per_worker[0], expect0);
}

// Workers that select nothing send empty lists; the collectives still complete and the update is
// what the other workers sent (or nothing at all).
TEST(EmptyLists, WorkersThatSelectNothingDoNotBreakTheExchange) {
  for (auto mode : {comm::GatherMode::kPadded, comm::GatherMode::kExact}) {
    for (int n : {1, 2, 5}) {
      SCOPED_TRACE(std::string(comm::to_string(mode)) + " " + std::to_string(n) + " workers");
      SparsifierConfig base;
      base.gather_mode = mode;
      base.hard_threshold = 0.5;
      // Nobody reaches the threshold.
      auto none = run_steps(
          "hard-threshold", n, 97, 0.1, 2, [](int, std::int64_t, int) { return 0.01f; }, base);
      for (const auto& st : none) {
        EXPECT_EQ(st.k_total, 0);
        EXPECT_EQ(st.k_unique, 0);
      }
      // Only odd ranks reach it, at every fourth index.
      auto some = run_steps(
          "hard-threshold", n, 97, 0.1, 2,
          [](int w, std::int64_t i, int) { return (w % 2 == 1 && i % 4 == 0) ? 1.0f : 0.01f; },
          base);
      for (int w = 0; w < n; ++w)
        EXPECT_EQ(some[0].k_per_worker[static_cast<std::size_t>(w)], w % 2 == 1 ? 25 : 0);
      EXPECT_EQ(some[0].k_unique, n > 1 ? 25 : 0);
    }
  }
}

TEST(Sidco, AllZeroGradientSelectsNothing) {
  const auto st = run_steps("sidco", 3, 1009, 0.01, 2, [](int, std::int64_t, int) { return 0.0f; });
  EXPECT_EQ(st[0].k_total, 0);
  EXPECT_EQ(st[1].k_total, 0);
}

// Stage-wise exponential fits on exactly exponential magnitudes land near the target count.
TEST(Sidco, ExponentialFitHitsTheDensityOnLaplaceData) {
  const std::int64_t n_g = 200'000;
  std::vector<float> lap(static_cast<std::size_t>(n_g));
  std::uint64_t s = 88172645463325252ull;  // xorshift64: the same numbers on every platform
  for (auto& x : lap) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    const double u = (static_cast<double>(s >> 11) + 0.5) / 9007199254740992.0;
    x = static_cast<float>(-0.01 * std::log(u)) * ((s & 1) ? 1.0f : -1.0f);
  }
  for (int stages : {1, 2, 3}) {
    for (double d : {0.01, 0.001}) {
      SparsifierConfig base;
      base.sidco.stages = stages;
      const auto st = run_steps(
          "sidco", 1, n_g, d, 1,
          [&](int, std::int64_t i, int) { return lap[static_cast<std::size_t>(i)]; }, base);
      const double ratio = static_cast<double>(st[0].k_total) / static_cast<double>(st[0].k_target);
      EXPECT_GT(ratio, 0.8) << stages << " stages, d = " << d;
      EXPECT_LT(ratio, 1.25) << stages << " stages, d = " << d;
      EXPECT_GT(st[0].threshold, 0.0);
    }
  }
}

// A sparsifier restored from another's saved state continues exactly like it.
TEST(State, SaveThenLoadContinuesIdentically) {
  for (const auto& name : all_names()) {
    SCOPED_TRACE(name);
    const int n = 3;
    const std::int64_t n_g = 1009;
    comm::run_local(n, [&](comm::Communicator& c) {
      const auto cfg = make_config(n_g, n, c.rank(), 0.05);
      auto a = builtin_registry().make(name, cfg);
      auto b = builtin_registry().make(name, cfg);
      EXPECT_EQ(a->fingerprint(), b->fingerprint());
      std::vector<float> acc(static_cast<std::size_t>(n_g));
      SparseResult ra, rb;
      StepStats st;
      for (int t = 0; t < 4; ++t) {
        for (std::int64_t i = 0; i < n_g; ++i)
          acc[static_cast<std::size_t>(i)] = fixture_grad(c.rank(), i, t);
        a->step(acc, c, ra, st);
      }
      b->load_state(a->save_state());
      EXPECT_EQ(b->save_state(), a->save_state());
      for (std::int64_t i = 0; i < n_g; ++i)
        acc[static_cast<std::size_t>(i)] = fixture_grad(c.rank(), i, 9);
      StepStats sa, sb;
      a->step(acc, c, ra, sa);
      b->step(acc, c, rb, sb);
      EXPECT_EQ(ra.indices, rb.indices);
      EXPECT_EQ(ra.values, rb.values);
      EXPECT_EQ(sa.k_per_worker, sb.k_per_worker);
    });
  }
}

TEST(State, TruncatedStateIsRefused) {
  for (const std::string name : {"topk", "cltk"}) {
    auto sp = builtin_registry().make(name, make_config(97, 1, 0, 0.1));
    auto st = sp->save_state();
    ASSERT_FALSE(st.empty());
    st.pop_back();
    EXPECT_THROW(sp->load_state(st), InvalidArgument) << name;
  }
  for (const std::string name : {"hard-threshold", "sidco", "gaussiank"}) {
    auto sp = builtin_registry().make(name, make_config(97, 1, 0, 0.1));
    std::vector<std::byte> junk(3);
    EXPECT_THROW(sp->load_state(junk), InvalidArgument) << name;
  }
}

// Found by tests/fuzz/sparsifier_state_fuzz: a state holding iteration 2^63 - 1 loaded, and the
// next step's ++iteration overflowed (undefined behaviour). Counters above kMaxStateIteration are
// refused; kMaxStateIteration itself loads and steps.
TEST(State, IterationBeyondAnyRunIsRefused) {
  const std::int64_t n_g = 97;
  for (const std::string name : {"topk", "cltk", "randomk", "exdyna"}) {
    SCOPED_TRACE(name);
    auto sp = builtin_registry().make(name, make_config(n_g, 1, 0, 0.1));
    auto st = sp->save_state();
    // topk, cltk and randomk save the counter alone; exdyna after magic, version, controller,
    // n_g, n_b.
    const std::size_t at = name == "exdyna" ? 28 : 0;
    ASSERT_GE(st.size(), at + 8);
    for (const std::int64_t bad :
         {std::numeric_limits<std::int64_t>::max(), kMaxStateIteration + 1}) {
      std::memcpy(st.data() + at, &bad, 8);
      EXPECT_THROW(sp->load_state(st), Error) << bad;
    }
    std::memcpy(st.data() + at, &kMaxStateIteration, 8);
    sp->load_state(st);
    comm::run_local(1, [&](comm::Communicator& c) {
      std::vector<float> acc(static_cast<std::size_t>(n_g), 1.0f);
      SparseResult r;
      StepStats stats;
      sp->step(acc, c, r, stats);
    });
  }
}

// NaN or Inf in a gradient is refused, naming the element, before anything is exchanged, and
// the group does not hang.
TEST(BadInput, NonFiniteGradientIsADataErrorNamingTheElement) {
  for (const auto& name : all_names()) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()}) {
      for (int n : {1, 3}) {
        SCOPED_TRACE(name + " " + std::to_string(bad) + " on " + std::to_string(n) + " workers");
        try {
          run_steps(name, n, 97, 0.1, 2, [&](int w, std::int64_t i, int t) {
            return (w == n - 1 && i == 17 && t == 1) ? bad : fixture_grad(w, i, t);
          });
          ADD_FAILURE() << "no exception";
        } catch (const DataError& e) {
          EXPECT_NE(std::string(e.what()).find("element 17"), std::string::npos) << e.what();
        }
      }
    }
  }
}

TEST(BadInput, UnknownSparsifierListsTheKnownNames) {
  try {
    builtin_registry().make("top-k-ish", make_config(97, 1, 0, 0.1));
    FAIL() << "no exception";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("top-k-ish"), std::string::npos) << msg;
    for (const auto& name : all_names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  // Every sparsifier this area owns is registered.
  const auto names = all_names();
  for (const std::string want : {"dense", "topk", "cltk", "hard-threshold", "sidco"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

TEST(BadInput, InvalidDensityIsRefusedNamingTheValue) {
  for (const auto& name : all_names()) {
    for (double d : {0.0, -1.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
      std::ostringstream v;
      v << d;
      try {
        builtin_registry().make(name, make_config(97, 1, 0, d));
        ADD_FAILURE() << name << " accepted density " << d;
      } catch (const InvalidArgument& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("density"), std::string::npos) << msg;
        EXPECT_NE(msg.find(v.str()), std::string::npos) << msg;
      }
    }
  }
}

}  // namespace
