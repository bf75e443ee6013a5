// sim/tape.hpp: a rank's collectives recorded in its group and served back to it alone give the
// same results call for call; a replay that calls otherwise, or sends otherwise, fails at once.
#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <numeric>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sim/tape.hpp"

using namespace exdyna;
using namespace exdyna::comm;
using namespace exdyna::sim;

namespace {

// Every collective once, with data that depends on the rank; returns what this rank got back, in
// order, as raw 64-bit words.
std::vector<std::int64_t> every_collective(Communicator& c, int salt) {
  const int r = c.rank(), n = c.size();
  std::vector<std::int64_t> seen;
  std::vector<std::int64_t> mine{r + salt, 10 * r}, all(2 * static_cast<std::size_t>(n));
  c.allgather_counts(mine, all);
  seen.insert(seen.end(), all.begin(), all.end());
  std::vector<std::int64_t> counts(static_cast<std::size_t>(n));
  std::iota(counts.begin(), counts.end(), 1);
  for (auto mode : {GatherMode::kPadded, GatherMode::kExact}) {
    std::vector<std::uint32_t> list(static_cast<std::size_t>(r + 1), 100u * r + salt), out;
    c.allgather_list<std::uint32_t>(list, counts, mode, out);
    seen.insert(seen.end(), out.begin(), out.end());
  }
  // rank r sends j + 1 copies of 7r + j to rank j
  std::vector<std::int32_t> send;
  std::vector<std::int64_t> send_counts;
  for (int j = 0; j < n; ++j) {
    send_counts.push_back(j + 1);
    send.insert(send.end(), static_cast<std::size_t>(j + 1), 7 * r + j);
  }
  std::vector<std::int32_t> recv;
  std::vector<std::int64_t> recv_counts;
  c.alltoall_list<std::int32_t>(send, send_counts, recv, recv_counts);
  seen.insert(seen.end(), recv.begin(), recv.end());
  seen.insert(seen.end(), recv_counts.begin(), recv_counts.end());
  std::vector<float> f{static_cast<float>(r), 0.5f};
  c.allreduce_sum(f);
  std::vector<double> d{1.25 * r};
  c.allreduce_sum(d);
  std::vector<float> h{static_cast<float>(r + 1)};
  c.allreduce_sum_16(h, core::ValueFormat::kBf16);
  for (float x : f) seen.push_back(static_cast<std::int64_t>(x * 4));
  seen.push_back(static_cast<std::int64_t>(d[0] * 4));
  seen.push_back(static_cast<std::int64_t>(h[0]));
  std::vector<int> b{r == n - 1 ? 42 + salt : 0};
  c.broadcast_values<int>(b, n - 1);
  seen.push_back(b[0]);
  c.barrier();
  return seen;
}

// Records `every_collective` on n ranks; returns the tapes and each rank's results.
void record(int n, std::vector<Tape>& tapes, std::vector<std::vector<std::int64_t>>& got) {
  tapes.assign(static_cast<std::size_t>(n), {});
  got.assign(static_cast<std::size_t>(n), {});
  std::mutex mu;
  run_local(n, [&](Communicator& c) {
    TapeRecorder rec(c, tapes[static_cast<std::size_t>(c.rank())]);
    auto seen = every_collective(rec, 3);
    const std::lock_guard<std::mutex> lock(mu);
    got[static_cast<std::size_t>(c.rank())] = std::move(seen);
  });
}

}  // namespace

TEST(Tape, ARankAloneGetsWhatItGotInItsGroup) {
  for (int n : {1, 3, 5}) {
    std::vector<Tape> tapes;
    std::vector<std::vector<std::int64_t>> got;
    record(n, tapes, got);
    // The results are the group's (a spot check that the recorder forwards, not just records).
    EXPECT_EQ(got[0][0], 3);
    EXPECT_EQ(got[0].back(), 45);
    for (int r = 0; r < n; ++r) {
      const auto& tape = tapes[static_cast<std::size_t>(r)];
      EXPECT_EQ(tape.rank, r);
      EXPECT_EQ(tape.size, n);
      EXPECT_EQ(tape.entries.size(), 10u);  // 9 collectives, the alltoall_list being two
      TapePlayer player(tape);
      EXPECT_EQ(player.rank(), r);
      EXPECT_EQ(player.size(), n);
      EXPECT_EQ(every_collective(player, 3), got[static_cast<std::size_t>(r)]) << "rank " << r;
      EXPECT_TRUE(player.finished());
    }
  }
}

TEST(Tape, AReplayThatSendsOtherDataFails) {
  std::vector<Tape> tapes;
  std::vector<std::vector<std::int64_t>> got;
  record(3, tapes, got);
  TapePlayer player(tapes[1]);
  // salt 4: rank 1's first all-gather sends (5, 10) where it sent (4, 10)
  EXPECT_THROW(every_collective(player, 4), DataError);
}

TEST(Tape, AReplayThatCallsAnotherCollectiveFails) {
  std::vector<Tape> tapes;
  std::vector<std::vector<std::int64_t>> got;
  record(2, tapes, got);
  TapePlayer player(tapes[0]);
  std::vector<float> f{1.0f};
  EXPECT_THROW(player.allreduce_sum(f), DataError);  // the tape starts with allgather_counts
  TapePlayer sized(tapes[0]);
  std::vector<std::int64_t> mine{3, 0, 1}, all(6);  // three words each where it sent two
  EXPECT_THROW(sized.allgather_counts(mine, all), DataError);
}

TEST(Tape, AReplayPastTheTapeFails) {
  std::vector<Tape> tapes;
  std::vector<std::vector<std::int64_t>> got;
  record(2, tapes, got);
  TapePlayer player(tapes[1]);
  every_collective(player, 3);
  EXPECT_TRUE(player.finished());
  EXPECT_THROW(player.barrier(), DataError);
}

TEST(Tape, APlayerRefusesATapeWithoutARank) {
  Tape t;
  t.rank = 2;
  t.size = 2;
  EXPECT_THROW(TapePlayer{t}, InvalidArgument);
}

TEST(Tape, ARecorderPastItsLimitKeepsNothingAndThePlayerRefusesIt) {
  std::vector<Tape> tapes(2);
  for (auto& t : tapes) t.limit = 64;  // the all-gathers (56 bytes) fit, the all-to-all does not
  run_local(2, [&](Communicator& c) {
    TapeRecorder rec(c, tapes[static_cast<std::size_t>(c.rank())]);
    every_collective(rec, 3);  // the group's collectives still run through
  });
  for (const auto& t : tapes) {
    EXPECT_TRUE(t.overflowed);
    EXPECT_TRUE(t.entries.empty());
    EXPECT_EQ(t.bytes, 0u);
    EXPECT_THROW(TapePlayer{t}, InvalidArgument);
  }
  Tape roomy;
  roomy.limit = 1 << 20;
  run_local(1, [&](Communicator& c) {
    TapeRecorder rec(c, roomy);
    every_collective(rec, 3);
  });
  EXPECT_FALSE(roomy.overflowed);
  std::size_t held = 0;
  for (const auto& e : roomy.entries) held += e.result.size();
  EXPECT_EQ(roomy.bytes, held);
}
