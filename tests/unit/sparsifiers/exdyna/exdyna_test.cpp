// The exdyna sparsifier on the in-process group: exclusivity, error feedback, decisions that
// follow Alg. 3 and Alg. 5, degenerate partitions, and state round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"
#include "exdyna/sparsifiers/exdyna/threshold.hpp"
#include "exdyna/sparsifiers/registry.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

// Values encode (rank, index, iteration): multiples of 1/64 in [-2, 2], so sums over up to 16
// ranks are exact in float and every expectation has a closed form.
float value(int r, std::int64_t i, std::int64_t t) {
  const std::int64_t h = (i * 7919 + r * 104729 + t * 31 + (i * i) % 101) % 257;
  return static_cast<float>(h - 128) / 64.0f;
}

SparsifierConfig config(std::int64_t n_g, int n, int rank, double d = 0.05) {
  SparsifierConfig c;
  c.density = d;
  c.n_g = n_g;
  c.world_size = n;
  c.rank = rank;
  // |x| >= 1.5 passes for about a quarter of the values: non-trivial selections.
  c.exdyna.initial_threshold = 1.5;
  // The paper's Algorithms 3 and 5, whose closed forms these tests check.
  c.exdyna.controller = Controller::kPaper;
  c.exdyna.balance = Balance::kPaper;
  return c;
}

// Element ranges of the partitions described by blocks_per_partition.
std::vector<sparsifiers::ElementRange> ranges_from(const StepStats& s,
                                                   const sparsifiers::BlockLayout& l) {
  std::vector<sparsifiers::ElementRange> out;
  std::int64_t pos = 0;
  for (std::size_t j = 0; j < s.blocks_per_partition.size(); ++j) {
    sparsifiers::ElementRange r;
    r.begin = pos * l.block_size;
    pos += s.blocks_per_partition[j];
    r.end = j + 1 == s.blocks_per_partition.size() ? l.n_g : pos * l.block_size;
    out.push_back(r);
  }
  return out;
}

}  // namespace

class ExDynaGroup : public ::testing::TestWithParam<int> {};

// No build-up: every gathered index comes from exactly one worker, from that worker's partition;
// error feedback loses nothing; every rank applies the same update, the mean of acc at the
// gathered indices; the next threshold is Alg. 5 of k' and the partitions stay a cover.
TEST_P(ExDynaGroup, ExclusiveSelectionAndErrorFeedbackInvariant) {
  const int n = GetParam();
  for (std::int64_t n_g : {std::int64_t{97}, std::int64_t{1000}, std::int64_t{32771}}) {
    if (n_g < n) continue;
    SCOPED_TRACE(n_g);
    std::vector<std::vector<float>> acc_of(static_cast<std::size_t>(n));
    std::vector<std::vector<float>> update_of(static_cast<std::size_t>(n));
    comm::run_local(n, [&](comm::Communicator& c) {
      const int r = c.rank();
      ErrorFeedback ef(std::make_unique<ExDyna>(config(n_g, n, r)), n_g);
      auto& ex = static_cast<ExDyna&>(ef.sparsifier());
      std::vector<float> grad(static_cast<std::size_t>(n_g));
      for (std::int64_t t = 0; t < 6; ++t) {
        for (std::int64_t i = 0; i < n_g; ++i) grad[i] = value(r, i, t);
        auto& acc = acc_of[r];
        acc.assign(ef.residual().begin(), ef.residual().end());
        for (std::int64_t i = 0; i < n_g; ++i) acc[i] += grad[i];
        const double thr_before = ex.threshold();
        const auto stats = ef.step(grad, c);
        update_of[r] = grad;
        c.barrier();  // every rank's acc and update are published

        const auto& res = ef.last_result();
        ASSERT_EQ(static_cast<std::int64_t>(res.indices.size()), stats.k_total);
        ASSERT_EQ(static_cast<int>(stats.k_per_worker.size()), n);
        EXPECT_EQ(stats.k_unique, stats.k_total);
        EXPECT_EQ(stats.threshold, thr_before);
        // Each rank's slice of the gathered list lies in the partition it was allocated.
        const auto ranges = ranges_from(stats, ex.partitions().layout());
        std::set<Index> seen;
        std::size_t p = 0;
        for (int q = 0; q < n; ++q) {
          EXPECT_EQ(stats.alloc_per_worker[q], sparsifiers::Partitions::allocation(t, q, n));
          const auto rg = ranges[stats.alloc_per_worker[q]];
          for (std::int64_t j = 0; j < stats.k_per_worker[q]; ++j, ++p) {
            const Index idx = res.indices[p];
            ASSERT_TRUE(seen.insert(idx).second) << "index " << idx << " gathered twice";
            ASSERT_GE(idx, rg.begin);
            ASSERT_LT(idx, rg.end);
            // Selected means |acc| >= threshold, unless it is the one fallback index.
            const bool fallback =
                stats.k_per_worker[q] == 1 && idx == static_cast<Index>(rg.begin + t % rg.size());
            if (!fallback) {
              EXPECT_GE(std::fabs(acc_of[q][idx]), static_cast<float>(thr_before));
            }
          }
        }
        // Values: the sum over ranks of acc at each index; the update is its mean, on every rank.
        for (std::size_t j = 0; j < res.indices.size(); ++j) {
          float sum = 0;
          for (int q = 0; q < n; ++q) sum += acc_of[q][res.indices[j]];
          ASSERT_EQ(res.values[j], sum);
        }
        const float inv_n = 1.0f / static_cast<float>(n);
        std::vector<char> sent(static_cast<std::size_t>(n_g), 0);
        for (auto idx : res.indices) sent[idx] = 1;
        for (std::int64_t i = 0; i < n_g; ++i) {
          // residual + sent part = acc, element by element.
          const float sent_part = sent[i] ? acc[i] : 0.0f;
          ASSERT_EQ(ef.residual()[i] + sent_part, acc[i]) << "element " << i;
          ASSERT_EQ(ef.residual()[i], sent[i] ? 0.0f : acc[i]);
          float sum = 0;
          for (int q = 0; q < n; ++q) sum += acc_of[q][i];
          ASSERT_EQ(update_of[r][i], sent[i] ? sum * inv_n : 0.0f) << "element " << i;
        }
        // Alg. 5 from k'.
        EXPECT_EQ(ex.threshold(),
                  sparsifiers::paper_next_threshold(thr_before, ex.k(), stats.k_total, 1.1, 0.005));
        c.barrier();  // nobody overwrites acc_of before everyone checked
      }
    });
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ExDynaGroup, ::testing::Range(1, 17));

// Every rank ends each step with the same threshold and partitions, and Alg. 3 is applied to the
// gathered counts re-ordered to partitions.
TEST(ExDyna, PartitionsFollowAlg3OnEveryRank) {
  const int n = 6;
  const std::int64_t n_g = 200'003;
  std::mutex mu;
  std::vector<std::vector<std::int64_t>> blocks(n);
  comm::run_local(n, [&](comm::Communicator& c) {
    const int r = c.rank();
    ExDyna ex(config(n_g, n, r, 0.01));
    // A model of the partitions, driven by the gathered counts only.
    sparsifiers::Partitions model(sparsifiers::make_block_layout(n_g, n, 1024), n);
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    SparseResult out;
    for (std::int64_t t = 0; t < 40; ++t) {
      // A hot region in the first tenth of the vector makes the partitions move.
      for (std::int64_t i = 0; i < n_g; ++i) acc[i] = value(r, i, t) * (i < n_g / 10 ? 3.0f : 1.0f);
      StepStats s;
      ex.step(acc, c, out, s);
      ASSERT_EQ(s.blocks_per_partition,
                std::vector<std::int64_t>(model.blocks().begin(), model.blocks().end()));
      model.adjust_paper(s.k_per_worker, t);
      ASSERT_EQ(std::vector<std::int64_t>(ex.partitions().blocks().begin(),
                                          ex.partitions().blocks().end()),
                std::vector<std::int64_t>(model.blocks().begin(), model.blocks().end()));
    }
    std::lock_guard<std::mutex> lock(mu);
    blocks[r].assign(ex.partitions().blocks().begin(), ex.partitions().blocks().end());
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(blocks[r], blocks[0]);
  EXPECT_NE(blocks[0], std::vector<std::int64_t>(n, 1024 / n + 1)) << "the hot spot moved nothing";
}

TEST(ExDyna, OneWorkerSelectsFromTheWholeVector) {
  const std::int64_t n_g = 5003;
  comm::run_local(1, [&](comm::Communicator& c) {
    ExDyna ex(config(n_g, 1, 0));
    std::vector<float> acc(static_cast<std::size_t>(n_g));
    for (std::int64_t i = 0; i < n_g; ++i) acc[i] = value(0, i, 0);
    SparseResult out;
    StepStats s;
    ex.step(acc, c, out, s);
    std::vector<Index> expect;
    for (std::int64_t i = 0; i < n_g; ++i)
      if (std::fabs(acc[i]) >= 1.5f) expect.push_back(static_cast<Index>(i));
    EXPECT_EQ(out.indices, expect);
    for (std::size_t j = 0; j < expect.size(); ++j) EXPECT_EQ(out.values[j], acc[expect[j]]);
    EXPECT_DOUBLE_EQ(s.f_t, 1.0);
    EXPECT_EQ(s.padded_elements, 0);
  });
}

// A partition (here: every partition, then one) that yields nothing sends exactly one index,
// (t mod partition length) + partition start; nobody hangs.
TEST(ExDyna, EmptyPartitionsSendOneIndexAndDoNotHang) {
  const int n = 5;
  const std::int64_t n_g = 40'000;
  comm::run_local(
      n,
      [&](comm::Communicator& c) {
        const int r = c.rank();
        ExDyna ex(config(n_g, n, r));
        std::vector<float> acc(static_cast<std::size_t>(n_g), 0.0f);
        SparseResult out;
        for (std::int64_t t = 0; t < 7; ++t) {
          // From t = 3 on, only rank 0's partition holds values above the threshold.
          const auto mine = ex.partitions().range(sparsifiers::Partitions::allocation(t, r, n));
          std::fill(acc.begin(), acc.end(), 0.0f);
          if (t >= 3 && r == 0) acc[mine.begin + 1] = 100.0f;
          const auto ranges = [&] {
            std::vector<sparsifiers::ElementRange> v;
            for (int j = 0; j < n; ++j) v.push_back(ex.partitions().range(j));
            return v;
          }();
          StepStats s;
          ex.step(acc, c, out, s);
          ASSERT_EQ(static_cast<int>(out.indices.size()), n);
          for (int q = 0; q < n; ++q) {
            EXPECT_EQ(s.k_per_worker[q], 1);
            const auto rg = ranges[sparsifiers::Partitions::allocation(t, q, n)];
            const Index expect = (t >= 3 && q == 0) ? static_cast<Index>(rg.begin + 1)
                                                    : static_cast<Index>(rg.begin + t % rg.size());
            EXPECT_EQ(out.indices[q], expect) << "rank " << q << " t " << t;
          }
        }
      },
      std::chrono::milliseconds(60'000));
}

// save_state / load_state resume bit-identically, and reject foreign state.
TEST(ExDyna, StateRoundTripResumesBitIdentically) {
  const int n = 4;
  const std::int64_t n_g = 65'537;
  comm::run_local(n, [&](comm::Communicator& c) {
    const int r = c.rank();
    auto run = [&](ExDyna& ex, std::int64_t t0, std::int64_t t1) {
      std::vector<std::vector<Index>> decisions;
      std::vector<float> acc(static_cast<std::size_t>(n_g));
      SparseResult out;
      for (std::int64_t t = t0; t < t1; ++t) {
        for (std::int64_t i = 0; i < n_g; ++i) acc[i] = value(r, i, t) * (i < 9000 ? 2.0f : 1.0f);
        StepStats s;
        ex.step(acc, c, out, s);
        decisions.push_back(out.indices);
      }
      return decisions;
    };
    ExDyna a(config(n_g, n, r, 0.01));
    run(a, 0, 10);
    const auto state = a.save_state();
    const auto cont = run(a, 10, 20);
    ExDyna b(config(n_g, n, r, 0.01));
    b.load_state(state);
    EXPECT_EQ(b.iteration(), 10);
    const auto resumed = run(b, 10, 20);
    EXPECT_EQ(resumed, cont);
    EXPECT_EQ(b.threshold(), a.threshold());
    EXPECT_EQ(b.save_state(), a.save_state());
    // Foreign or truncated state is refused.
    ExDyna other(config(n_g + 4096, n, r, 0.01));
    EXPECT_THROW(other.load_state(state), DataError);
    EXPECT_THROW(b.load_state(std::span<const std::byte>(state.data(), state.size() - 3)),
                 DataError);
  });
}

TEST(ExDyna, RegisteredAndValidated) {
  const auto reg = builtin_registry();
  auto s = reg.make("exdyna", config(1000, 1, 0));
  EXPECT_EQ(s->name(), "exdyna");
  auto bad = config(1000, 8, 0);
  bad.exdyna.n_blocks = 4;  // n_b < n
  EXPECT_THROW(reg.make("exdyna", bad), InvalidArgument);
  EXPECT_THROW(ExDyna{bad}, InvalidArgument);
  auto bad_d = config(1000, 2, 0);
  bad_d.density = 1.5;
  EXPECT_THROW(ExDyna{bad_d}, InvalidArgument);
}
