// The options of the exdyna sparsifier beyond the paper: the histogram controller (ladder kernel,
// exact threshold from the summed ladder) and exact balance (equal shares of the gathered indices).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <random>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"
#include "exdyna/sparsifiers/exdyna/threshold.hpp"

using namespace exdyna;
using namespace exdyna::core;
using namespace exdyna::sparsifiers;
using namespace exdyna::sparsifiers;

TEST(Ladder, GridValuesAreExactAndKeysOrderLikeValues) {
  EXPECT_EQ(ladder_value(ladder_key(0.75f, 2), 2), 0.75f);  // 1.10b x 2^-1 is on the 2-bit grid
  EXPECT_EQ(ladder_value(ladder_key(0.8f, 2), 2), 0.75f);   // rounds down to the grid
  EXPECT_EQ(ladder_key(-0.8f, 2), ladder_key(0.8f, 2));     // of |v|
  LadderGrid g{2, ladder_key(0.5f, 2), 9};
  EXPECT_EQ(g.value(0), 0.5f);
  EXPECT_EQ(g.value(1), 0.625f);
  EXPECT_EQ(g.value(4), 1.0f);
  EXPECT_EQ(g.value(8), 2.0f);
}

TEST(Ladder, KernelsMatchTheScalarReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0, 1);
  const LadderGrid grid{2, ladder_key(0.3f, 2), 33};
  for (std::size_t len : {0, 1, 15, 16, 63, 64, 65, 200, 1001, 70'000}) {
    std::vector<float> v(len);
    for (auto& x : v) x = g(rng);
    if (len > 10) {
      v[3] = grid.value(5);   // exactly on a rung
      v[7] = -grid.value(0);  // exactly on rung 0
      v[9] = 1e30f;           // far above the top: counted in the last bin
    }
    for (float thr : {0.5f, 1.7f, 3.0f}) {
      std::vector<std::uint32_t> ref(len + 1), out(len + 1, 0xdeadbeef);
      std::vector<std::int64_t> rb(33, 0);
      const auto nr = select_threshold_ladder_scalar(v, thr, 11, ref.data(), grid, rb.data());
      for (auto k : {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2,
                     SelectKernel::kAvx512}) {
        if (!select_kernel_available(k)) continue;
        std::vector<std::int64_t> b(33, 7);  // added to, not cleared
        std::vector<float> scratch(len + 1);
        const auto n =
            select_threshold_ladder_with(k, v, thr, 11, out.data(), grid, b.data(), scratch.data());
        ASSERT_EQ(n, nr) << to_string(k) << " length " << len;
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], ref[i]);
        for (int j = 0; j < 33; ++j) ASSERT_EQ(b[j], rb[j] + 7) << to_string(k) << " bin " << j;
        EXPECT_EQ(out[len], 0xdeadbeefu);
      }
      // The selection part is the plain kernel's.
      std::vector<std::uint32_t> plain(len + 1);
      EXPECT_EQ(select_threshold(v, thr, 11, plain.data()), nr);
      // Bins are exact counts: count at or above rung j = #{|x| >= value(j)}.
      std::int64_t above = 0;
      for (int j = 32; j >= 1; --j) {
        above += rb[j];
        std::int64_t direct = 0;
        for (float x : v) direct += std::fabs(x) >= grid.value(j);
        ASSERT_EQ(above, direct) << "rung " << j;
      }
    }
  }
}

// The candidates are exactly the values at or above rung 0, in order, with their |x|, on every
// kernel (NaN and values just below rung 0 never; tails of every length).
TEST(Ladder, CandidatesAreTheValuesAtOrAboveRungZero) {
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0, 1);
  const LadderGrid grid{4, ladder_key(1.1f, 4), 129};
  for (std::size_t len : {0, 3, 31, 32, 33, 64, 127, 5000}) {
    std::vector<float> v(len);
    for (auto& x : v) x = g(rng);
    if (len > 20) {
      v[1] = std::nanf("");
      v[2] = -grid.value(0);
      v[4] = std::nextafter(grid.value(0), 0.0f);
      v[len - 1] = std::numeric_limits<float>::infinity();
    }
    std::vector<std::uint32_t> want_idx;
    std::vector<float> want_abs;
    for (std::size_t i = 0; i < len; ++i)
      if (std::fabs(v[i]) >= grid.value(0)) {
        want_idx.push_back(static_cast<std::uint32_t>(i) + 5);
        want_abs.push_back(std::fabs(v[i]));
      }
    std::vector<std::int64_t> want_bins(129, 0);
    std::vector<std::uint32_t> ref(len + 1);
    select_threshold_ladder_scalar(v, 1e30f, 5, ref.data(), grid, want_bins.data());
    for (auto k :
         {SelectKernel::kScalar, SelectKernel::kSse2, SelectKernel::kAvx2, SelectKernel::kAvx512}) {
      if (!select_kernel_available(k)) continue;
      std::vector<std::uint32_t> idx(len + 1, 0xdeadbeef);
      std::vector<float> abs(len + 1, -1.0f);
      std::vector<std::int64_t> bins(129, 0);
      const auto c =
          collect_ladder_candidates_with(k, v, 5, grid, idx.data(), abs.data(), bins.data());
      ASSERT_EQ(c, want_idx.size()) << to_string(k) << " length " << len;
      for (std::size_t i = 0; i < c; ++i) {
        ASSERT_EQ(idx[i], want_idx[i]) << to_string(k);
        ASSERT_EQ(abs[i], want_abs[i]) << to_string(k);
      }
      EXPECT_EQ(bins, want_bins) << to_string(k);
      EXPECT_EQ(idx[len], 0xdeadbeefu);  // nothing written past part.size()
    }
  }
}

TEST(HistogramController, DefaultLadderIsFourRungsPerOctave) {
  HistogramController h(33, 16);
  EXPECT_EQ(h.mant_bits(), 2);
  EXPECT_EQ(h.wide_down(), 16);
  EXPECT_THROW(HistogramController(2, 16), InvalidArgument);
  EXPECT_THROW(HistogramController(33, 1.0), InvalidArgument);
}

// k values sit exactly on a rung and everything else far below: the next threshold is that rung.
TEST(HistogramController, PicksTheExactThresholdOnAKnownDistribution) {
  HistogramController h(33, 16);
  const std::int64_t k = 1000;
  std::vector<float> v(50'000, 0.01f);
  for (std::int64_t i = 0; i < k; ++i)
    v[static_cast<std::size_t>(i * 37)] = (i % 2 ? 0.75f : -0.75f);
  const double thr = 0.8;
  const auto grid = h.grid(thr);
  std::vector<std::int64_t> bins(33, 0);
  std::vector<std::uint32_t> out(v.size());
  std::vector<float> scratch(v.size());
  EXPECT_EQ(select_threshold_ladder(v, static_cast<float>(thr), 0, out.data(), grid, bins.data(),
                                    scratch.data()),
            0u);
  EXPECT_EQ(h.next_threshold(thr, k, bins), 0.75);
  EXPECT_EQ(h.down(), h.steady_down());
}

// A power law count(>= x) = N x^-3: log-log interpolation between rungs recovers the threshold
// that selects k, to within one element's worth.
TEST(HistogramController, InterpolatesAPowerLawTail) {
  const std::int64_t N = 200'000, k = 2'000;
  std::vector<float> v(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i)
    v[static_cast<std::size_t>(i)] =
        static_cast<float>(std::cbrt(static_cast<double>(N) / (i + 0.5)));
  const double exact = std::cbrt(static_cast<double>(N) / k);  // k-th largest is about this
  HistogramController h(33, 16);
  for (double thr : {exact * 1.1, exact / 1.2}) {  // k within the steady reach
    std::vector<std::int64_t> bins(33, 0);
    std::vector<std::uint32_t> out(v.size());
    std::vector<float> scratch(v.size());
    select_threshold_ladder(v, static_cast<float>(thr), 0, out.data(), h.grid(thr), bins.data(),
                            scratch.data());
    HistogramController fresh(33, 16);
    const double next = fresh.next_threshold(thr, k, bins);
    EXPECT_NEAR(next / exact, 1.0, 0.002) << "from " << thr;
    std::int64_t selected = 0;
    for (float x : v) selected += x >= static_cast<float>(next);
    EXPECT_NEAR(static_cast<double>(selected), static_cast<double>(k), 0.005 * k);
  }
}

// An exponential (Laplace) tail, count(>= x) = N exp(-x): its log count is concave in log x, so a
// chord between two rungs sits low; with a third rung the estimate is within 0.5% of k even on the
// coarse grid of 4 rungs per octave, far out in the tail (local slope x = 8).
TEST(HistogramController, ConcaveTailIsNotBiasedLow) {
  const std::int64_t N = 3'000'000, k = 1'000;
  std::vector<float> v(static_cast<std::size_t>(N));
  for (std::int64_t i = 0; i < N; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<float>(-std::log((i + 0.5) / N));
  const double exact = std::log(static_cast<double>(N) / k);
  for (const int rungs : {33, 129}) {
    HistogramController h(rungs, 16);
    const double thr = exact * 0.97;
    std::vector<std::int64_t> bins(static_cast<std::size_t>(rungs), 0);
    std::vector<std::uint32_t> out(v.size());
    std::vector<float> scratch(v.size());
    select_threshold_ladder(v, static_cast<float>(thr), 0, out.data(), h.grid(thr), bins.data(),
                            scratch.data());
    const double next = h.next_threshold(thr, k, bins);
    std::int64_t selected = 0;
    for (float x : v) selected += x >= static_cast<float>(next);
    EXPECT_NEAR(static_cast<double>(selected), static_cast<double>(k), 0.005 * k) << rungs;
  }
}

// The reach below follows the recent movement of the exact threshold: after a jump it reaches as
// far below as the jump went (real gradients spike for an iteration and fall back), and it
// returns to the steady quarter octave as the movement decays.
TEST(HistogramController, ReachBelowFollowsTheMovement) {
  HistogramController h(129, 16);
  const std::int64_t N = 400'000, k = 1'000;
  auto tail = [&](double scale) {  // count(>= x) = N exp(-x / scale)
    std::vector<float> v(static_cast<std::size_t>(N));
    for (std::int64_t i = 0; i < N; ++i)
      v[static_cast<std::size_t>(i)] = static_cast<float>(-scale * std::log((i + 0.5) / N));
    return v;
  };
  auto step = [&](double thr, const std::vector<float>& v) {
    std::vector<std::int64_t> bins(129, 0);
    std::vector<std::uint32_t> out(v.size());
    std::vector<float> scratch(v.size());
    select_threshold_ladder(v, static_cast<float>(thr), 0, out.data(), h.grid(thr), bins.data(),
                            scratch.data());
    return h.next_threshold(thr, k, bins);
  };
  const auto calm = tail(1.0);
  double thr = std::log(static_cast<double>(N) / k);
  for (int i = 0; i < 4; ++i) thr = step(thr, calm);
  EXPECT_EQ(h.down(), h.steady_down());
  EXPECT_LT(h.movement(), std::log(1.05));
  thr = step(thr, tail(3.0));                 // a spike: the exact threshold triples
  EXPECT_GT(h.down(), h.steady_down() + 16);  // more than an octave below
  EXPECT_LE(h.down(), h.wide_down());
  EXPECT_GT(h.movement(), std::log(2.5));
  for (int i = 0; i < 20; ++i) thr = step(thr, calm);
  EXPECT_EQ(h.down(), h.steady_down());  // decayed back
  EXPECT_THROW(h.set_trend(1.0, 0.0, -1.0), InvalidArgument);
}

// Under a binding cap the reach's floor follows how far below the threshold the
// deepest worker's cut fell (plus half an octave), up at once and down halfway per iteration,
// instead of holding its widest for as long as the cap binds.
TEST(HistogramController, CapFloorFollowsTheCutsSpread) {
  HistogramController h(129, 16);  // 16 rungs per octave: steady 4, wide 64
  ASSERT_EQ(h.steady_down(), 4);
  h.set_min_down(h.wide_down());  // as the cold iteration may leave it
  h.cap_pressure(true, false);
  EXPECT_EQ(h.min_down(), 64);  // binding alone never lowers the floor
  h.cap_spread(4);              // the cuts fell a quarter octave below: target 4 + 8 = 12
  EXPECT_EQ(h.min_down(), 38);  // halfway down
  h.cap_spread(4);
  EXPECT_EQ(h.min_down(), 25);
  for (int i = 0; i < 10; ++i) h.cap_spread(4);
  EXPECT_EQ(h.min_down(), 12);
  h.cap_spread(30);  // a worker cut deeper: up at once
  EXPECT_EQ(h.min_down(), 38);
  h.cap_spread(500);  // never past the ladder's lower half
  EXPECT_EQ(h.min_down(), h.wide_down());
  for (int i = 0; i < 20; ++i) h.cap_spread(-3);  // the cuts above the threshold: the floor
  EXPECT_EQ(h.min_down(), 2 * h.steady_down());
}

TEST(HistogramController, OutsideTheLadderTakesItsEnd) {
  HistogramController h(33, 16);
  std::vector<std::int64_t> bins(33, 0);
  // Nothing anywhere on the ladder: k lies below it.
  const auto g = h.grid(1.0);
  EXPECT_EQ(h.next_threshold(1.0, 10, bins), g.value(0));
  EXPECT_EQ(h.down(), h.wide_down());  // and the next ladder reaches half its length down
  // Everything above the top rung: k lies above it.
  const auto g2 = h.grid(1.0);
  bins.assign(33, 0);
  bins[32] = 100;
  EXPECT_EQ(h.next_threshold(1.0, 10, bins), g2.value(32));
  EXPECT_EQ(h.down(), h.steady_down());
}

namespace {

SparsifierConfig config(std::int64_t n_g, int n, int rank, Controller c, Balance b,
                        std::int64_t n_blocks = 1024) {
  SparsifierConfig cfg;
  cfg.density = 0.01;
  cfg.n_g = n_g;
  cfg.world_size = n;
  cfg.rank = rank;
  cfg.exdyna.controller = c;
  cfg.exdyna.balance = b;
  cfg.exdyna.n_blocks = n_blocks;
  cfg.exdyna.initial_threshold = 1.5;
  cfg.exdyna.worker_cap = 0;  // no cap unless a test sets one (capped_config)
  return cfg;
}

// The exact controller under the automatic worker cap (the WorkerCap tests' sparsifier).
SparsifierConfig capped_config(std::int64_t n_g, int n, int rank, Balance b) {
  auto cfg = config(n_g, n, rank, Controller::kExact, b);
  cfg.exdyna.worker_cap = ExDynaOptions::kAutoCap;
  return cfg;
}

// The yield tests' run: 4 workers under the automatic cap (paper balance), where three workers at
// the cap cannot give k; body(c, sparsifier, cap) runs on every rank.
void on_four_capped_workers(
    std::int64_t n_g, const std::function<void(comm::Communicator&, ExDyna&, std::int64_t)>& body) {
  comm::run_local(4, [&](comm::Communicator& c) {
    const auto cfg = capped_config(n_g, 4, c.rank(), Balance::kPaper);
    ExDyna a(cfg);
    const auto cap = cfg.exdyna.max_per_worker(a.k(), 4);
    ASSERT_LT(3 * cap, a.k());
    body(c, a, cap);
  });
}

// Exponential magnitudes with alternating signs; the first fifth of the vector 4x larger (a hot
// region that starts inside one partition).
void fill_hot_fifth(std::vector<float>& acc, unsigned seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<float> e(1.0f);
  const auto n_g = static_cast<std::int64_t>(acc.size());
  for (std::int64_t i = 0; i < n_g; ++i)
    acc[static_cast<std::size_t>(i)] =
        e(rng) * (i < n_g / 5 ? 4.0f : 1.0f) * ((i & 1) ? 1.0f : -1.0f);
}

// A sparsifier restored from a's state continues bit for bit: in steps t0..t1 (fill(t) writes
// acc) both select the same indices with the same threshold, ladder reach and floor.
template <typename Fill>
void expect_restored_continues(ExDyna& a, const SparsifierConfig& cfg, comm::Communicator& c,
                               std::vector<float>& acc, Fill fill, std::int64_t t0,
                               std::int64_t t1) {
  ExDyna b(cfg);
  b.load_state(a.save_state());
  EXPECT_EQ(b.histogram()->min_down(), a.histogram()->min_down());
  for (std::int64_t t = t0; t < t1; ++t) {
    fill(t);
    SparseResult oa, ob;
    StepStats sa, sb;
    a.step(acc, c, oa, sa);
    b.step(acc, c, ob, sb);
    ASSERT_EQ(oa.indices, ob.indices) << "step " << t;
    ASSERT_EQ(a.threshold(), b.threshold()) << "step " << t;
    ASSERT_EQ(a.floor_rung(), b.floor_rung()) << "step " << t;
  }
}

}  // namespace

// 16 blocks of 32 elements, 4 workers; block b holds w_b values of 10 (all selected):
// w = 3 3 2 2 2 1 1 1 1 1 1 0 0 0 0 6 (24 in all). Equal shares of 6 need blocks {2, 3, 10, 1}.
TEST(ExactBalance, EqualSharesOfAHandMadeIndexSet) {
  const int n = 4;
  const std::vector<int> w{3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 6};
  comm::run_local(n, [&](comm::Communicator& c) {
    ExDyna ex(config(16 * 32, n, c.rank(), Controller::kPaper, Balance::kExact, 16));
    EXPECT_EQ(ex.partitions().min_blk(), 1.0);  // exact balance's default
    std::vector<float> acc(16 * 32, 0.0f);
    for (int b = 0; b < 16; ++b)
      for (int j = 0; j < w[b]; ++j) acc[b * 32 + j] = 10.0f;
    SparseResult out;
    StepStats s;
    ex.step(acc, c, out, s);
    EXPECT_EQ(s.k_total, 24);
    EXPECT_EQ(
        std::vector<std::int64_t>(ex.partitions().blocks().begin(), ex.partitions().blocks().end()),
        (std::vector<std::int64_t>{2, 3, 10, 1}));
    // The next step (same values: none was zeroed here) gives every worker exactly 6.
    ex.step(acc, c, out, s);
    EXPECT_EQ(s.k_per_worker, (std::vector<std::int64_t>{6, 6, 6, 6}));
    EXPECT_DOUBLE_EQ(s.f_t, 1.0);
  });
}

TEST(ExactBalance, ExplicitMinBlkIsHonoured) {
  comm::run_local(2, [&](comm::Communicator& c) {
    auto cfg = config(1 << 20, 2, c.rank(), Controller::kPaper, Balance::kExact);
    cfg.exdyna.min_blk = 100;
    ExDyna ex(cfg);
    std::vector<float> acc(1 << 20, 0.0f);
    for (int i = 0; i < 5000; ++i) acc[i] = 10.0f;  // everything in block 0 and 1
    SparseResult out;
    StepStats s;
    ex.step(acc, c, out, s);
    EXPECT_EQ(ex.partitions().blocks()[0], 100);
  });
}

// Both options, alone and together: every rank agrees, a cold start from a threshold 16x too
// low lands near k within a few steps, and save/load resumes bit-identically.
class OptionModes : public ::testing::TestWithParam<std::pair<Controller, Balance>> {};

TEST_P(OptionModes, AgreeConvergeAndSurviveSaveLoad) {
  const auto [ctl, bal] = GetParam();
  const int n = 4;
  const std::int64_t n_g = 300'007;
  std::mutex mu;
  std::vector<double> thresholds;
  comm::run_local(n, [&](comm::Communicator& c) {
    const int r = c.rank();
    auto fill = [&](std::vector<float>& acc, std::int64_t t) {
      fill_hot_fifth(acc, static_cast<unsigned>(1000 * t + r));
    };
    auto cfg = config(n_g, n, r, ctl, bal);
    cfg.exdyna.initial_threshold = 0.3;  // far below the ~4.6 to 6 that selects 1%
    ExDyna a(cfg);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult out;
    StepStats s;
    for (std::int64_t t = 0; t < 8; ++t) {
      fill(acc, t);
      a.step(acc, c, out, s);
      // The exact controller's ladder reaches 7.75 octaves above 0.3: k is bracketed from the
      // first step, so every step selects exactly k, plus the one index each worker whose cut is
      // empty still sends (the hot fifth starts in one partition).
      if (ctl == Controller::kExact) {
        const auto forced = std::count(s.k_per_worker.begin(), s.k_per_worker.end(), 1);
        EXPECT_GE(s.k_total, a.k()) << "step " << t;
        EXPECT_LE(s.k_total, a.k() + forced) << "step " << t;
        if (bal == Balance::kExact && t >= 2) {
          EXPECT_EQ(s.k_total, a.k()) << "step " << t;
        }
        EXPECT_EQ(static_cast<std::int64_t>(out.indices.size()), s.k_total);
      }
    }
    if (ctl == Controller::kHistogram) {
      // Fresh data each step, no error feedback: the exact threshold of the last step is right.
      EXPECT_NEAR(static_cast<double>(s.k_total) / static_cast<double>(a.k()), 1.0, 0.1);
    }
    if (bal == Balance::kExact) {
      EXPECT_LT(s.f_t, 1.15);  // the hot fifth of the vector is split evenly
    }
    const auto state = a.save_state();
    ExDyna b(cfg);
    b.load_state(state);
    EXPECT_EQ(b.save_state(), state);
    for (std::int64_t t = 8; t < 12; ++t) {
      fill(acc, t);
      SparseResult oa, ob;
      StepStats sa, sb;
      a.step(acc, c, oa, sa);
      b.step(acc, c, ob, sb);
      ASSERT_EQ(oa.indices, ob.indices);
      ASSERT_EQ(a.threshold(), b.threshold());
    }
    // A sparsifier with another controller refuses this state.
    for (const auto o : {Controller::kPaper, Controller::kHistogram, Controller::kExact}) {
      if (o == ctl) continue;
      auto other = cfg;
      other.exdyna.controller = o;
      ExDyna wrong(other);
      EXPECT_THROW(wrong.load_state(state), DataError) << to_string(o);
    }
    std::lock_guard<std::mutex> lock(mu);
    thresholds.push_back(a.threshold());
  });
  for (double t : thresholds) EXPECT_EQ(t, thresholds[0]);
}

INSTANTIATE_TEST_SUITE_P(Modes, OptionModes,
                         ::testing::Values(std::pair{Controller::kHistogram, Balance::kPaper},
                                           std::pair{Controller::kPaper, Balance::kExact},
                                           std::pair{Controller::kHistogram, Balance::kExact},
                                           std::pair{Controller::kExact, Balance::kPaper},
                                           std::pair{Controller::kExact, Balance::kExact}));

TEST(WorkerCap, ParsesAndRoundsToAtMostTheFactor) {
  EXPECT_EQ(parse_worker_cap("auto"), ExDynaOptions::kAutoCap);
  EXPECT_EQ(parse_worker_cap("none"), 0);
  EXPECT_EQ(parse_worker_cap("0"), 0);
  EXPECT_EQ(parse_worker_cap("1.5"), 1.5);
  for (const char* bad : {"0.5", "-1", "abc", "1.5x", "", "nan", "inf"})
    EXPECT_THROW(parse_worker_cap(bad), InvalidArgument) << bad;
  ExDynaOptions o;
  EXPECT_EQ(o.max_per_worker(1000, 8), 147);  // the default: auto with the exact controller
  o.controller = Controller::kPaper;
  EXPECT_EQ(o.max_per_worker(1000, 8), 0);  // and none with the paper's
  o.controller = Controller::kExact;
  o.worker_cap = 0;
  EXPECT_EQ(o.max_per_worker(1000, 8), 0);  // none
  o.worker_cap = 1.5;
  EXPECT_EQ(o.max_per_worker(1000, 8), 187);  // floor(1.5 * 125)
  o.worker_cap = 1;
  EXPECT_EQ(o.max_per_worker(1001, 8), 126);  // never below ceil(k / n)
  o.worker_cap = ExDynaOptions::kAutoCap;     // 1 + sqrt(2 ln 8 / 125) = 1.1824
  EXPECT_EQ(o.max_per_worker(1000, 8), 147);
  EXPECT_EQ(o.max_per_worker(1000, 1), 0);  // one worker sends all k: no cap
  o.worker_cap = 1.5;
  EXPECT_EQ(o.max_per_worker(1000, 1), 0);
  o.controller = Controller::kHistogram;
  EXPECT_THROW(o.validate(8), InvalidArgument);  // a cap needs the exact controller
}

// A cap that would leave k out of reach yields (on the LSTM trace at d = 0.01, exact balance
// gave one worker a partition of absent words' exact zeros, the other 7 stopped at the cap, 0.951 d
// was sent): the last quarter of the vector is zero, so under the auto cap (~1.07 k/n) the three
// other workers could give ~0.8 k. The plan lifts the cap just enough: k from iteration 0, and no
// worker above what k needs from three workers. (On AVX-512, iteration 2 is a one-pass step in
// which the lifted cap asks a worker for more than the words it kept under the cap:
// the fallback in ExDyna::own_cut after store_capped.)
TEST(WorkerCap, YieldsWhereItWouldLeaveKOutOfReach) {
  const std::int64_t n_g = 1 << 18;
  on_four_capped_workers(n_g, [&](comm::Communicator& c, ExDyna& a, std::int64_t cap) {
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult out;
    StepStats s;
    for (std::int64_t t = 0; t < 3; ++t) {
      std::mt19937 rng(static_cast<unsigned>(31 * t + c.rank()));
      std::exponential_distribution<float> e(1.0f);
      for (std::int64_t i = 0; i < n_g; ++i)
        acc[static_cast<std::size_t>(i)] = i < 3 * (n_g / 4) ? e(rng) : 0.0f;
      a.step(acc, c, out, s);
      EXPECT_EQ(s.k_total, a.k()) << "step " << t;
      const auto most = *std::max_element(s.k_per_worker.begin(), s.k_per_worker.end());
      EXPECT_GT(most, cap) << "step " << t;
      EXPECT_LE(most, (a.k() + 2) / 3 + 1) << "step " << t;  // the smallest cap that gives k
    }
  });
}

// Under a binding cap a worker stores only its candidates from the bin of its cap-th largest
// value before the counts all-gather (ExDyna::store_capped: two passes collect them then). Where
// the cap yields and asks for values of a lower bin, they are collected again after the plan:
// the partitions of three workers each hold `cap` values of 2 and the rest near 0.01, octaves
// below, and the fourth worker's partition is zero, so the lifted cap reaches into the 0.01 bin
// (iteration 1: two passes, the candidates being most of each partition; the cold iteration's
// ladder reaches down to 0, so there the plan takes zeros instead of lifting the cap). Every
// value of 2 is sent, and k.
TEST(WorkerCap, AYieldingCapReachesBelowTheCandidatesStoredUnderIt) {
  const std::int64_t n_g = 1 << 16;
  on_four_capped_workers(n_g, [&](comm::Communicator& c, ExDyna& a, std::int64_t cap) {
    const int n = 4;
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult out;
    StepStats s;
    for (std::int64_t t = 0; t < 2; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::mt19937 rng(static_cast<unsigned>(17 + t));
      std::uniform_real_distribution<float> u(1.0f, 1.5f);
      std::vector<Index> large;
      for (int w = 0; w + 1 < n; ++w) {
        const auto r = a.partitions().range(Partitions::allocation(t, w, n));
        for (std::int64_t i = r.begin; i < r.end; ++i) {
          const bool big = i - r.begin < cap;
          acc[static_cast<std::size_t>(i)] = big ? 2.0f : 0.01f * u(rng);
          if (big) large.push_back(static_cast<Index>(i));
        }
      }
      std::sort(large.begin(), large.end());
      a.step(acc, c, out, s);
      EXPECT_EQ(s.k_total, a.k()) << "step " << t;
      if (t == 0) continue;
      EXPECT_GT(*std::max_element(s.k_per_worker.begin(), s.k_per_worker.end()), cap);
      std::vector<Index> sent(out.indices.begin(), out.indices.end());
      std::sort(sent.begin(), sent.end());
      EXPECT_TRUE(std::includes(sent.begin(), sent.end(), large.begin(), large.end()));
    }
  });
}

// Under a cap no worker sends more than its cap, and the others make up k: the hot fifth of the
// vector sits in one partition at first, so without the cap one worker would send most of k.
TEST(WorkerCap, NoWorkerExceedsItAndTheTotalStaysK) {
  const int n = 4;
  const std::int64_t n_g = 200'003;
  comm::run_local(n, [&](comm::Communicator& c) {
    auto cfg = capped_config(n_g, n, c.rank(), Balance::kPaper);
    ExDyna a(cfg);
    const auto cap = cfg.exdyna.max_per_worker(a.k(), n);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    auto fill = [&](std::int64_t t) {
      fill_hot_fifth(acc, static_cast<unsigned>(77 * t + c.rank()));
    };
    SparseResult out;
    StepStats s;
    for (std::int64_t t = 0; t < 12; ++t) {
      fill(t);
      a.step(acc, c, out, s);
      for (const auto k : s.k_per_worker) EXPECT_LE(k, cap) << "step " << t;
      if (t >= 3) {
        EXPECT_EQ(s.k_total, a.k()) << "step " << t;
      }
    }
    EXPECT_LE(s.f_t, static_cast<double>(n * cap) / static_cast<double>(a.k()) + 1e-12);
    // The cap's reach is state: a restored sparsifier continues bit for bit.
    expect_restored_continues(a, cfg, c, acc, fill, 12, 16);
  });
}

// A worker the plan leaves empty sends one index, so the plan's own total is k minus such workers;
// that is not a ladder that ran short. The last two partitions hold exact zeros (Alg. 3 moves one
// block per iteration, so the last stays empty for the whole run and the rotation hands it to
// each worker in turn), and under a binding cap the reach must still come back from the cold
// start's widest instead of doubling for good (it held 4 octaves in every iteration on the CNN
// trace at 16 workers, d = 0.001).
TEST(WorkerCap, AWorkerLeftEmptyDoesNotHoldTheReachAtItsWidest) {
  const int n = 8;
  const std::int64_t n_g = 100'003;
  comm::run_local(n, [&](comm::Communicator& c) {
    auto cfg = capped_config(n_g, n, c.rank(), Balance::kPaper);
    ExDyna a(cfg);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult out;
    StepStats s;
    int empty = 0;
    for (std::int64_t t = 0; t < 16; ++t) {
      fill_hot_fifth(acc, static_cast<unsigned>(53 * t + c.rank()));
      std::fill(acc.end() - 2 * (n_g / n), acc.end(), 0.0f);
      a.step(acc, c, out, s);
      EXPECT_EQ(s.k_total, a.k()) << "step " << t;
      empty += std::count(s.k_per_worker.begin(), s.k_per_worker.end(), 1);
    }
    EXPECT_GE(empty, 8);  // the case under test happened
    EXPECT_LT(a.histogram()->down(), a.histogram()->wide_down());
  });
}

// Under a binding cap the ladder reaches as deep as the deepest worker's cut, but a
// capped worker cuts where its own partition holds the cap, far above it. Each worker collects
// from a floor below the cut its partition needed in the last step (ExDyna::floor_rung), so the
// hot region's workers store a fraction of the reach's candidates; the total stays exactly k, no
// worker exceeds the cap once the partitions have settled, and the floor is state: a restored
// sparsifier continues bit for bit.
TEST(WorkerCap, CappedWorkersCollectFromTheirOwnFloor) {
  const int n = 8;
  const std::int64_t n_g = 400'003;
  comm::run_local(n, [&](comm::Communicator& c) {
    auto cfg = capped_config(n_g, n, c.rank(), Balance::kExact);
    ExDyna a(cfg);
    const auto cap = cfg.exdyna.max_per_worker(a.k(), n);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    // Half of the vector 64x larger than the rest: four workers' partitions are capped and the
    // other four cut six octaves lower.
    auto fill = [&](std::int64_t t) {
      std::mt19937 rng(static_cast<unsigned>(91 * t + c.rank()));
      std::exponential_distribution<float> e(1.0f);
      for (std::int64_t i = 0; i < n_g; ++i)
        acc[static_cast<std::size_t>(i)] = e(rng) * (i < n_g / 2 ? 64.0f : 1.0f);
    };
    SparseResult out;
    StepStats s;
    int floors = 0;
    for (std::int64_t t = 0; t < 12; ++t) {
      fill(t);
      a.step(acc, c, out, s);
      EXPECT_EQ(s.k_total, a.k()) << "step " << t;
      // (In steps 1 and 2 exact balance is still moving the hot half's edges, and the cap
      // yields where it would leave k out of reach, floor or not.)
      if (t >= 3) {
        for (const auto k : s.k_per_worker) EXPECT_LE(k, cap) << "step " << t;
      }
      floors += a.floor_rung() > 0;
    }
    EXPECT_GE(floors, 4);  // the hot half's workers in most steps
    expect_restored_continues(a, cfg, c, acc, fill, 12, 16);
  });
}

// State version 4 ends with the predicted cut (two doubles); a version 3 state (the same without
// them) still loads and the restored sparsifier keeps k exact, and a predicted cut that is not a
// finite value >= 0 is rejected as data, not used.
TEST(WorkerCap, AVersion3StateLoadsAndABadPredictedCutIsRejected) {
  const int n = 4;
  const std::int64_t n_g = 200'003;
  comm::run_local(n, [&](comm::Communicator& c) {
    auto cfg = capped_config(n_g, n, c.rank(), Balance::kExact);
    ExDyna a(cfg);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult out;
    StepStats s;
    for (std::int64_t t = 0; t < 4; ++t) {
      fill_hot_fifth(acc, static_cast<unsigned>(17 * t + c.rank()));
      a.step(acc, c, out, s);
    }
    const auto v4 = a.save_state();
    ASSERT_GT(v4.size(), 24u);
    auto v3 = v4;
    v3.resize(v3.size() - 2 * sizeof(double));
    const std::uint32_t three = 3;
    std::memcpy(v3.data() + sizeof(std::uint32_t), &three, sizeof(three));
    ExDyna b(cfg);
    b.load_state(v3);
    fill_hot_fifth(acc, 99u + static_cast<unsigned>(c.rank()));
    b.step(acc, c, out, s);
    EXPECT_EQ(s.k_total, b.k());
    EXPECT_EQ(b.floor_rung(), 0);  // no predicted cut in a version 3 state
    auto bad = v4;                 // the predicted cut's two doubles replaced by 0.5 and -1
    bad.resize(bad.size() - 2 * sizeof(double));
    for (const double v : {0.5, -1.0})
      for (const auto b : std::bit_cast<std::array<std::byte, sizeof(double)>>(v)) bad.push_back(b);
    ExDyna d(cfg);
    EXPECT_THROW(d.load_state(bad), DataError);
  });
}

// The exact controller holds exactly k from iteration 0 even when the first threshold
// (1.5 here) lies orders of magnitude above every value (a word-level LSTM's first gradients sit
// 10^3..10^6 below 1 / (2 sqrt k)), with and without a worker cap, and the ladders that follow
// keep it through a x10 step.
TEST(ExactController, ExactFromIterationZeroOnValuesFarBelowTheFirstThreshold) {
  for (const double cap : {0.0, ExDynaOptions::kAutoCap}) {
    SCOPED_TRACE(cap);
    const int n = 4;
    const std::int64_t n_g = 100'003;
    comm::run_local(n, [&](comm::Communicator& c) {
      auto cfg = config(n_g, n, c.rank(), Controller::kExact, Balance::kExact);
      cfg.exdyna.worker_cap = cap;
      ExDyna a(cfg);
      std::vector<float> acc(static_cast<std::size_t>(n_g));
      SparseResult out;
      StepStats s;
      for (std::int64_t t = 0; t < 12; ++t) {
        fill_hot_fifth(acc, static_cast<unsigned>(31 * t + c.rank()));
        const float scale = t < 6 ? 1e-5f : 1e-4f;
        for (auto& v : acc) v *= scale;
        a.step(acc, c, out, s);
        EXPECT_EQ(s.k_total, a.k()) << "step " << t;
      }
    });
  }
}

// The ladders ride in a fixed slot of the count all-gather (ladder_wire.hpp), and a
// ladder too long for it loses its lowest rungs. Values spread evenly in log over the 4 octaves
// below the maximum fill every rung the wide reach of iteration 1 spans with thousands of values
// (3 bytes each, more than the slot holds); every rank still computes the same plan from the
// same decoded slots, and the selection stays exactly k.
TEST(ExactController, LaddersTooLongForTheirSlotKeepThePlanIdenticalOnEveryRank) {
  const int n = 4;
  const std::int64_t n_g = 1 << 21;
  std::mutex mu;
  std::vector<std::vector<Index>> selections(n);
  std::vector<double> thresholds(n);
  int truncated = 0;
  comm::run_local(n, [&](comm::Communicator& c) {
    auto cfg = config(n_g, n, c.rank(), Controller::kExact, Balance::kExact);
    cfg.density = 0.0001;
    ExDyna a(cfg);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult out;
    StepStats s;
    int mine = 0;
    for (std::int64_t t = 0; t < 4; ++t) {
      std::mt19937 rng(static_cast<unsigned>(7 * t + 1));  // the same vector on every rank
      std::uniform_real_distribution<float> u(0.0f, 4.0f);
      for (auto& v : acc) v = std::exp2(-u(rng));
      a.step(acc, c, out, s);
      EXPECT_EQ(s.k_total, a.k()) << "step " << t;
      mine += a.slot_lowest_rung() > 0;
    }
    std::lock_guard<std::mutex> lock(mu);
    selections[static_cast<std::size_t>(c.rank())] = out.indices;
    thresholds[static_cast<std::size_t>(c.rank())] = a.threshold();
    truncated += mine;
  });
  EXPECT_GT(truncated, 0);  // the case under test happened
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(selections[static_cast<std::size_t>(r)], selections[0]);
    EXPECT_EQ(thresholds[static_cast<std::size_t>(r)], thresholds[0]);
  }
}
