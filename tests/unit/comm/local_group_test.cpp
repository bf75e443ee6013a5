#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>

#include "exdyna/comm/local_group.hpp"

using namespace exdyna;
using namespace exdyna::comm;

class LocalGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(LocalGroupTest, CollectivesHaveClosedForms) {
  const int n = GetParam();
  run_local(n, [n](Communicator& c) {
    const int r = c.rank();
    // counts: rank r contributes (r, 10r)
    std::vector<std::int64_t> mine{r, 10 * r}, all(2 * static_cast<std::size_t>(n));
    c.allgather_counts(mine, all);
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(all[2 * q], q);
      EXPECT_EQ(all[2 * q + 1], 10 * q);
    }
    // lists: rank q sends q+1 elements valued 1000q + j
    std::vector<std::int64_t> counts(static_cast<std::size_t>(n));
    std::iota(counts.begin(), counts.end(), 1);
    for (auto mode : {GatherMode::kPadded, GatherMode::kExact}) {
      std::vector<std::uint32_t> list(static_cast<std::size_t>(r + 1));
      for (int j = 0; j <= r; ++j)
        list[static_cast<std::size_t>(j)] = static_cast<std::uint32_t>(1000 * r + j);
      std::vector<std::uint32_t> out;
      const auto before = c.bytes();
      c.allgather_list<std::uint32_t>(list, counts, mode, out);
      ASSERT_EQ(out.size(), static_cast<std::size_t>(n * (n + 1) / 2));
      std::size_t p = 0;
      for (int q = 0; q < n; ++q)
        for (int j = 0; j <= q; ++j) EXPECT_EQ(out[p++], static_cast<std::uint32_t>(1000 * q + j));
      const auto d = c.bytes() - before;
      const std::uint64_t exact = 4ull * static_cast<std::uint64_t>(n * (n + 1) / 2);
      if (mode == GatherMode::kExact) {
        EXPECT_EQ(d.allgather_indices, exact);
        EXPECT_EQ(d.padded_elements, 0u);
      } else {
        EXPECT_EQ(d.allgather_indices, 4ull * static_cast<std::uint64_t>(n * n));
        EXPECT_EQ(d.padded_elements, static_cast<std::uint64_t>(n * n - n * (n + 1) / 2));
      }
    }
    std::vector<float> v{static_cast<float>(r), 1.0f};
    c.allreduce_sum(v);
    EXPECT_EQ(v[0], static_cast<float>(n * (n - 1) / 2));
    EXPECT_EQ(v[1], static_cast<float>(n));
    std::vector<int> b{r == n - 1 ? 42 : 0};
    c.broadcast_values<int>(b, n - 1);
    EXPECT_EQ(b[0], 42);
    c.barrier();
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, LocalGroupTest, ::testing::Range(1, 17));

TEST(LocalGroup, ARankThatThrowsDoesNotHangThePeers) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(run_local(4,
                         [](Communicator& c) {
                           if (c.rank() == 2) throw DataError("rank 2 gave up");
                           c.barrier();
                         }),
               DataError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
}

TEST(LocalGroup, AStalledRankTimesOutEveryone) {
  std::atomic<int> timeouts{0};
  EXPECT_THROW(run_local(
                   3,
                   [&](Communicator& c) {
                     if (c.rank() == 0) return;  // never joins the barrier
                     try {
                       c.barrier();
                     } catch (const CommError&) {
                       ++timeouts;
                       throw;
                     }
                   },
                   std::chrono::milliseconds(200)),
               CommError);
  EXPECT_EQ(timeouts.load(), 2);
}

TEST(LocalGroup, RejectsMismatchedCounts) {
  run_local(1, [](Communicator& c) {
    std::vector<std::uint32_t> list{1, 2};
    std::vector<std::int64_t> counts{3};
    std::vector<std::uint32_t> out;
    EXPECT_THROW(c.allgather_list<std::uint32_t>(list, counts, GatherMode::kExact, out),
                 InvalidArgument);
  });
}

// alltoall_list: rank r sends rank j a list of (r + 2j) % 3 elements valued 100r + 10j + p; each
// rank receives, in rank order, exactly what was addressed to it; bytes count only what leaves.
TEST_P(LocalGroupTest, AlltoallListDeliversEachListToItsRank) {
  const int n = GetParam();
  run_local(n, [n](Communicator& c) {
    const int r = c.rank();
    auto len = [](int from, int to) { return static_cast<std::int64_t>((from + 2 * to) % 3); };
    std::vector<std::int64_t> counts;
    std::vector<std::uint32_t> send;
    std::uint64_t to_others = 0;
    for (int j = 0; j < n; ++j) {
      counts.push_back(len(r, j));
      for (std::int64_t p = 0; p < len(r, j); ++p)
        send.push_back(static_cast<std::uint32_t>(100 * r + 10 * j + p));
      if (j != r) to_others += static_cast<std::uint64_t>(len(r, j));
    }
    std::vector<std::uint32_t> recv{7, 7, 7};  // overwritten, not appended to
    std::vector<std::int64_t> recv_counts;
    const auto before = c.bytes();
    c.alltoall_list<std::uint32_t>(send, counts, recv, recv_counts);
    const auto d = c.bytes() - before;
    ASSERT_EQ(recv_counts.size(), static_cast<std::size_t>(n));
    std::size_t pos = 0;
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(recv_counts[static_cast<std::size_t>(q)], len(q, r));
      for (std::int64_t p = 0; p < len(q, r); ++p, ++pos) {
        ASSERT_LT(pos, recv.size());
        EXPECT_EQ(recv[pos], static_cast<std::uint32_t>(100 * q + 10 * r + p));
      }
    }
    EXPECT_EQ(recv.size(), pos);
    EXPECT_EQ(d.alltoall, 4 * to_others);
    EXPECT_EQ(d.allgather_counts, 8u * static_cast<std::uint64_t>(n));
  });
}

TEST(LocalGroup, AlltoallListRefusesCountsThatDoNotMatchTheList) {
  run_local(2, [](Communicator& c) {
    std::vector<std::uint32_t> send{1, 2, 3}, recv;
    std::vector<std::int64_t> counts{1, 1}, rc;  // 2 announced, 3 given
    EXPECT_THROW(c.alltoall_list<std::uint32_t>(send, counts, recv, rc), InvalidArgument);
    std::vector<std::int64_t> wrong_size{3};
    EXPECT_THROW(c.alltoall_list<std::uint32_t>(send, wrong_size, recv, rc), InvalidArgument);
  });
}

TEST(LocalGroup, CountsTheCpuTimeSpentInsideCollectives) {
  run_local(2, [](Communicator& c) {
    EXPECT_EQ(c.cpu_seconds(), 0.0);
    std::vector<float> v(std::size_t{1} << 22, 1.0f);
    double before = c.cpu_seconds();
    for (int i = 0; i < 4; ++i) {
      c.allreduce_sum(v);
      EXPECT_GE(c.cpu_seconds(), before);
      before = c.cpu_seconds();
    }
    EXPECT_GT(c.cpu_seconds(), 0.0);  // 4 sums of 4M floats take measurable CPU time
    EXPECT_EQ(v[123], 16.0f);
  });
}
