// Ok-Topk (sparsifiers/oktopk.hpp): a hand-worked re-evaluation step and a reuse step on 2 ranks
// (regions, reduce-scatter sums, global selection, balancing, what each worker sent, bytes), the
// same global selection on every rank over a longer run, the volume bound on reuse steps, error
// feedback keeping what the global selection dropped, and the state round trip and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/sparsifiers/oktopk.hpp"
#include "exdyna/sparsifiers/registry.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

SparsifierConfig config(std::int64_t n_g, int n, int rank, double density,
                        comm::GatherMode mode = comm::GatherMode::kPadded) {
  SparsifierConfig c;
  c.n_g = n_g;
  c.world_size = n;
  c.rank = rank;
  c.density = density;
  c.gather_mode = mode;
  return c;
}

struct Seen {
  SparseResult res;
  StepStats st;
  comm::ByteCounts bytes;
};

// Reproducible pseudo-random gradients.
std::uint64_t mix(std::uint64_t x) {
  return core::splitmix64_mix(x);
}

}  // namespace

// n_g = 8, d = 0.25 (k = 2), 2 ranks.
// Step 0 (re-evaluation): rank 0 acc = [5 0 0 1 0 0 0 3], top-2 {0, 7}, th_0 = 3;
//   rank 1 acc = [0 4 0 2 0 0 0 6], top-2 {1, 7}, th_1 = 4. Repartition: both propose L[1] = 7,
//   so the regions are [0, 7) and [7, 8). Reduce-scatter: owner 0 sums {0: 5, 1: 4}, owner 1
//   {7: 3 + 6 = 9}. All reduced entries gathered, exact top-2: {0: 5, 7: 9}, th_g = 5.
//   Rank 0 sent at 0 and 7, rank 1 at 7 only (its 4 at index 1 was dropped globally).
// Step 1 (reuse): rank 0 acc = [6 0 0 1 0 0 2 3.5], |x| >= 3: {0, 7}; rank 1 acc =
//   [0 4 0 0 0 0 5 1], |x| >= 4: {1, 6}. Owner 0 sums {0: 6, 1: 4, 6: 5}, owner 1 {7: 3.5}; kept
//   with |sum| >= 5: owner 0 {0, 6}, owner 1 nothing. Padded: balanced to one record each, then
//   gathered: {0: 6, 6: 5}; exact: gathered as [2, 0]. Rank 0 sent at 0, rank 1 at 6.
TEST(OkTopk, HandWorkedReevaluationAndReuseStepsOnTwoRanks) {
  const std::vector<std::vector<float>> acc0 = {{5, 0, 0, 1, 0, 0, 0, 3}, {0, 4, 0, 2, 0, 0, 0, 6}};
  const std::vector<std::vector<float>> acc1 = {{6, 0, 0, 1, 0, 0, 2, 3.5f},
                                                {0, 4, 0, 0, 0, 0, 5, 1}};
  for (auto mode : {comm::GatherMode::kPadded, comm::GatherMode::kExact}) {
    std::vector<std::vector<Seen>> seen(2, std::vector<Seen>(2));
    std::vector<std::vector<std::int64_t>> bounds(2);
    comm::run_local(2, [&](comm::Communicator& c) {
      const auto r = static_cast<std::size_t>(c.rank());
      OkTopk sp(config(8, 2, c.rank(), 0.25, mode));
      for (int t = 0; t < 2; ++t) {
        auto& s = seen[r][static_cast<std::size_t>(t)];
        s.st.n_g = 8;  // error feedback sets it in a run
        const auto before = c.bytes();
        sp.step(t == 0 ? acc0[r] : acc1[r], c, s.res, s.st);
        s.bytes = c.bytes() - before;
        if (t == 0) {
          EXPECT_EQ(sp.local_threshold(), r == 0 ? 3.0 : 4.0);
          EXPECT_EQ(sp.global_threshold(), 5.0);
        }
      }
      bounds[r] = sp.boundaries();
    });
    for (std::size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(bounds[r], (std::vector<std::int64_t>{0, 7, 8}));
      const auto& s0 = seen[r][0];
      EXPECT_TRUE(s0.res.partial);
      EXPECT_EQ(s0.res.indices, (std::vector<Index>{0, 7}));
      EXPECT_EQ(s0.res.values, (std::vector<float>{5, 9}));
      EXPECT_EQ(s0.res.sent, r == 0 ? (std::vector<Index>{0, 7}) : (std::vector<Index>{7}));
      EXPECT_EQ(s0.st.k_per_worker, (std::vector<std::int64_t>{1, 1}));
      EXPECT_EQ(s0.st.threshold, 5.0);
      EXPECT_EQ(s0.bytes.alltoall, 8u);  // one 8-byte record to the other rank
      // All reduced entries gathered: counts [2, 1], padded to 2 or exact.
      EXPECT_EQ(s0.bytes.allgather_indices, mode == comm::GatherMode::kPadded ? 32u : 24u);
      EXPECT_EQ(s0.bytes.allreduce, 8u);  // the repartition's one proposal (a double)

      const auto& s1 = seen[r][1];
      EXPECT_EQ(s1.res.indices, (std::vector<Index>{0, 6}));
      EXPECT_EQ(s1.res.values, (std::vector<float>{6, 5}));
      EXPECT_EQ(s1.res.sent, r == 0 ? (std::vector<Index>{0}) : (std::vector<Index>{6}));
      EXPECT_EQ(s1.st.threshold, 5.0);
      EXPECT_EQ(s1.st.k_unique, 2);
      EXPECT_DOUBLE_EQ(s1.st.density, 0.25);
      EXPECT_EQ(s1.bytes.allreduce, 0u);  // no repartition
      if (mode == comm::GatherMode::kPadded) {
        EXPECT_EQ(s1.st.k_per_worker, (std::vector<std::int64_t>{1, 1}));
        EXPECT_EQ(s1.st.f_t, 1.0);
        // Reduce-scatter (rank 0: (7, 3.5) out; rank 1: (1, 4), (6, 5) out) plus balancing
        // (rank 0 hands (6, 5) to rank 1).
        EXPECT_EQ(s1.bytes.alltoall, 16u);
        EXPECT_EQ(s1.bytes.allgather_indices, 16u);
      } else {
        EXPECT_EQ(s1.st.k_per_worker, (std::vector<std::int64_t>{2, 0}));
        EXPECT_EQ(s1.bytes.alltoall, r == 0 ? 8u : 16u);
        EXPECT_EQ(s1.bytes.allgather_indices, 16u);
      }
    }
  }
}

// 5 ranks, 60 steps through error feedback, period 8, repartition 16: every rank ends each step
// with the same indices and values (bit for bit) and the same boundaries; re-evaluation steps
// select exactly k; residual + sent part = acc on every worker (what the global selection dropped
// stays in the residual).
TEST(OkTopk, SameGlobalSelectionOnEveryRankAndErrorFeedbackKeepsTheDropped) {
  const int n = 5, steps = 60;
  const std::int64_t n_g = 4001;
  auto cfg = config(0, 0, 0, 0.01);
  cfg.oktopk.period = 8;
  cfg.oktopk.repartition = 16;
  std::vector<std::vector<SparseResult>> seen(n);
  std::vector<int> bad_residual(n, 0), wrong_k(n, 0);
  comm::run_local(n, [&](comm::Communicator& c) {
    auto ef = make_error_feedback("oktopk", cfg, n_g, n, c.rank(), builtin_registry());
    std::vector<float> g(static_cast<std::size_t>(n_g)), acc(g.size());
    for (int t = 0; t < steps; ++t) {
      for (std::int64_t i = 0; i < n_g; ++i) {
        const auto h = mix(static_cast<std::uint64_t>(t * 1000003 + i * 7 + c.rank()));
        g[static_cast<std::size_t>(i)] =
            static_cast<float>(static_cast<double>(h % 20001) / 10000.0 - 1.0) *
            (i % 97 == 0 ? 8.0f : 1.0f);
      }
      for (std::size_t i = 0; i < g.size(); ++i) acc[i] = ef.residual()[i] + g[i];
      const auto st = ef.step(g, c);
      const auto& res = ef.last_result();
      seen[static_cast<std::size_t>(c.rank())].push_back(res);
      if (t % 8 == 0 && st.k_unique != 40) ++wrong_k[static_cast<std::size_t>(c.rank())];
      std::vector<bool> sent(g.size(), false);
      for (const Index i : res.sent) sent[i] = true;
      for (std::size_t i = 0; i < g.size(); ++i)
        if (ef.residual()[i] != (sent[i] ? 0.0f : acc[i]))
          ++bad_residual[static_cast<std::size_t>(c.rank())];
    }
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(bad_residual[static_cast<std::size_t>(r)], 0) << "rank " << r;
    EXPECT_EQ(wrong_k[static_cast<std::size_t>(r)], 0) << "rank " << r;
    for (int t = 0; t < steps; ++t) {
      const auto& a = seen[0][static_cast<std::size_t>(t)];
      const auto& b = seen[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)];
      EXPECT_EQ(a.indices, b.indices) << "rank " << r << " step " << t;
      EXPECT_EQ(a.values, b.values) << "rank " << r << " step " << t;
      EXPECT_TRUE(std::is_sorted(b.indices.begin(), b.indices.end()));
      EXPECT_TRUE(std::includes(b.indices.begin(), b.indices.end(), b.sent.begin(), b.sent.end()));
    }
  }
}

// The volume bound on steps that reuse the thresholds. Every worker holds exactly k values of
// magnitude >= 1 (the rest below 0.01), at positions that move every step, so |L_i| = k under the
// reused threshold. Per worker and step the lists moved are at most: its L_i in the reduce-scatter,
// at most its kept share in the balancing, and the balanced all-gather of the |G| kept records,
// padded to P ceil(|G| / P): 8 (|L_i| + |G| + P ceil(|G| / P)) bytes. When |G| <= k that is the
// paper's 6k words (+ the rounding of the shares).
TEST(OkTopk, ReuseStepsMoveAtMostTheBoundOfBytes) {
  const int n = 4, steps = 24;
  const std::int64_t n_g = 8000, k = 80;
  std::vector<int> over(n, 0), checked(n, 0);
  comm::run_local(n, [&](comm::Communicator& c) {
    auto cfg = config(n_g, n, c.rank(), 0.01);
    cfg.oktopk.period = 1000;
    OkTopk sp(cfg);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult res;
    for (int t = 0; t < steps; ++t) {
      for (std::int64_t i = 0; i < n_g; ++i)
        acc[static_cast<std::size_t>(i)] =
            0.001f * static_cast<float>(mix(static_cast<std::uint64_t>(i + 7 * t)) % 10);
      for (std::int64_t j = 0; j < k;
           ++j) {  // k distinct big values, half at positions shared by all workers
        const auto pos = (j * 97 + t * 13 + (j % 2 ? c.rank() * 31 : 0)) % n_g;
        acc[static_cast<std::size_t>(pos)] =
            1.0f + static_cast<float>((j * 7 + c.rank()) % 5) + 0.001f * static_cast<float>(j);
      }
      StepStats st;
      const auto before = c.bytes();
      sp.step(acc, c, res, st);
      const auto b = c.bytes() - before;
      if (t == 0) continue;  // the re-evaluation step gathers every reduced entry
      const auto g = st.k_unique;
      const auto lists = b.alltoall + b.allgather_indices;
      const auto bound = 8 * (k + g + n * ((g + n - 1) / n));
      if (static_cast<std::int64_t>(lists) > bound) ++over[static_cast<std::size_t>(c.rank())];
      if (g <= k) {
        EXPECT_LE(static_cast<std::int64_t>(lists), 6 * k * 4 + 8 * n) << "step " << t;
        ++checked[static_cast<std::size_t>(c.rank())];
      }
    }
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(over[static_cast<std::size_t>(r)], 0) << "rank " << r;
    EXPECT_GT(checked[static_cast<std::size_t>(r)], 0) << "no step had |G| <= k";
  }
}

// Saving after 7 steps and resuming in a new sparsifier gives what an uninterrupted run gives.
TEST(OkTopk, StateRoundTripResumesIdentically) {
  const int n = 3, steps = 14, cut = 7;
  const std::int64_t n_g = 3001;
  auto run = [&](bool resume) {
    std::vector<std::vector<SparseResult>> out(n);
    comm::run_local(n, [&](comm::Communicator& c) {
      auto cfg = config(n_g, n, c.rank(), 0.02);
      cfg.oktopk.period = 4;
      cfg.oktopk.repartition = 3;
      auto sp = std::make_unique<OkTopk>(cfg);
      std::vector<float> acc(static_cast<std::size_t>(n_g));
      for (int t = 0; t < steps; ++t) {
        if (resume && t == cut) {
          const auto state = sp->save_state();
          sp = std::make_unique<OkTopk>(cfg);
          sp->load_state(state);
        }
        for (std::int64_t i = 0; i < n_g; ++i)
          acc[static_cast<std::size_t>(i)] =
              static_cast<float>(mix(static_cast<std::uint64_t>(i * 3 + t * 11 + c.rank())) %
                                 1000) -
              500.0f;
        SparseResult res;
        StepStats st;
        sp->step(acc, c, res, st);
        out[static_cast<std::size_t>(c.rank())].push_back(res);
      }
    });
    return out;
  };
  const auto a = run(false), b = run(true);
  for (int r = 0; r < n; ++r)
    for (int t = 0; t < steps; ++t) {
      EXPECT_EQ(a[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)].indices,
                b[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)].indices);
      EXPECT_EQ(a[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)].values,
                b[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)].values);
    }
}

TEST(OkTopk, RefusesBadStatesAndOptionsNamingThem) {
  OkTopk sp(config(100, 2, 0, 0.1));
  const auto good = sp.save_state();
  OkTopk other_world(config(100, 3, 0, 0.1));
  EXPECT_THROW(other_world.load_state(good), DataError);
  auto truncated = good;
  truncated.pop_back();
  EXPECT_THROW(sp.load_state(truncated), DataError);
  core::ByteWriter w;  // boundaries out of order
  w.put(std::uint32_t{0x4f6b546bu});
  w.put(std::int64_t{3});
  w.put(1.0);
  w.put(1.0);
  const std::vector<std::int64_t> bad{0, 60, 40, 100};
  w.put_list(std::span<const std::int64_t>(bad.data(), 3));
  EXPECT_THROW(sp.load_state(w.bytes()), DataError);
  auto cfg = config(100, 2, 0, 0.1);
  cfg.oktopk.period = 0;
  try {
    OkTopk bad_period(cfg);
    FAIL() << "period 0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--oktopk-period 0"), std::string::npos) << e.what();
  }
  auto cfg2 = config(100, 2, 0, 0.1);
  cfg2.oktopk.period = 5;
  EXPECT_NE(OkTopk(cfg2).fingerprint(), sp.fingerprint());
  EXPECT_NE(sp.fingerprint().find("oktopk;period=32;repartition=64"), std::string::npos);
}
