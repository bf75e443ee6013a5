// Emulated hosts (namespaces, links, shaping, clean-up after exit, SIGINT and SIGKILL), the rank
// launcher, and the matrix's pure helpers. Tests that need network namespaces skip where they
// cannot be made.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "exdyna/core/error.hpp"
#include "exdyna/eval/hosts.hpp"
#include "exdyna/eval/matrix.hpp"
#include "exdyna/eval/rank_launch.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace {

using namespace exdyna::eval;

// The message of the InvalidArgument that f throws (fails the test when it throws none).
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const exdyna::InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InvalidArgument thrown";
  return {};
}

#define SKIP_WITHOUT_NETNS()                     \
  do {                                           \
    const auto why = netns_unavailable_reason(); \
    if (!why.empty()) GTEST_SKIP() << why;       \
  } while (0)

TEST(LinkOptions, RatesParseAndBadOnesNameTheValue) {
  EXPECT_EQ(parse_rate("1gbit", "--bandwidth"), 1'000'000'000u);
  EXPECT_EQ(parse_rate("100mbit", "--bandwidth"), 100'000'000u);
  EXPECT_EQ(parse_rate("2.5gbit", "--bandwidth"), 2'500'000'000u);
  const auto m = invalid_argument_message([] { parse_rate("fast", "--bandwidth"); });
  EXPECT_NE(m.find("--bandwidth 'fast'"), std::string::npos) << m;
  EXPECT_NE(invalid_argument_message([] { parse_rate("10gbps", "--bandwidth"); }).find("10gbps"),
            std::string::npos);
  EXPECT_NE(invalid_argument_message([] { parse_rate("0gbit", "--bandwidth"); }).find("0gbit"),
            std::string::npos);
  EXPECT_EQ(rate_name(10'000'000'000u), "10gbit");
  EXPECT_EQ(rate_name(100'000'000u), "100mbit");
  EXPECT_EQ(rate_name(1'500'000u), "1500kbit");
}

TEST(LinkOptions, DelayAndLoss) {
  EXPECT_DOUBLE_EQ(parse_delay_us("50us", "--delay"), 50);
  EXPECT_DOUBLE_EQ(parse_delay_us("2ms", "--delay"), 2000);
  EXPECT_DOUBLE_EQ(parse_delay_us("0", "--delay"), 0);
  EXPECT_NE(invalid_argument_message([] { parse_delay_us("-1us", "--delay"); }).find("'-1us'"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(parse_loss_pct("0.5%", "--loss"), 0.5);
  EXPECT_NE(invalid_argument_message([] { parse_loss_pct("100", "--loss"); }).find("'100'"),
            std::string::npos);
}

TEST(Matrix, DenseRunsOncePerSettingAndUnknownLabelsAreNamed) {
  MatrixOptions o;
  o.workers = {2, 4};
  o.bandwidths = {1'000'000'000};
  o.densities = {0.01, 0.001};
  o.labels = {"dense", "topk", "exdyna-exact"};
  const auto cells = plan_cells(o);
  ASSERT_EQ(cells.size(), 2u * (1 + 2 * 2));
  EXPECT_EQ(std::count_if(cells.begin(), cells.end(),
                          [](const CellSpec& c) { return c.variant.sparsifier == "dense"; }),
            2);
  EXPECT_EQ(cells[0].name(), "dense-w2-b1gbit");
  EXPECT_EQ(cells[1].name(), "topk-w2-b1gbit-d0.01");
  const auto ex = variant_for("exdyna-exact");
  EXPECT_EQ(ex.sparsifier, "exdyna");
  EXPECT_NE(std::find(ex.args.begin(), ex.args.end(), "exact"), ex.args.end());
  EXPECT_NE(invalid_argument_message([] { variant_for("foo"); }).find("'foo'"), std::string::npos);
}

TEST(Matrix, AutoWarmupCoversTheRotatingRoles) {
  MatrixOptions o;
  const CellSpec ex{variant_for("exdyna-exact"), 8, 1'000'000'000, 0.001};
  const CellSpec topk{variant_for("topk"), 8, 1'000'000'000, 0.001};
  EXPECT_EQ(warmup_for(o, ex), 9);
  EXPECT_EQ(warmup_for(o, topk), 2);
  EXPECT_EQ(warmup_for(o, CellSpec{variant_for("cltk"), 4, 1'000'000'000, 0.01}), 5);
  // At 2 workers the roles' W + 1 is under the 3 iterations every rank needs to settle.
  EXPECT_EQ(warmup_for(o, CellSpec{variant_for("exdyna-paper"), 2, 1'000'000'000, 0.01}), 3);
  o.warmup = 0;
  EXPECT_EQ(warmup_for(o, ex), 0);
}

TEST(Matrix, CommTableInterpolatesAndExtrapolates) {
  CommTable t;
  t.add("allreduce", 4096, 0.001);
  t.add("allreduce", 16384, 0.002);
  t.add("allreduce", 65536, 0.006);
  EXPECT_DOUBLE_EQ(t.time_s("allreduce", 0), 0);
  EXPECT_DOUBLE_EQ(t.time_s("allreduce", 100), 0.001);  // latency floor
  EXPECT_NEAR(t.time_s("allreduce", 10240), 0.0015, 1e-12);
  EXPECT_NEAR(t.time_s("allreduce", 65536 + 49152), 0.010, 1e-12);  // the last slope on
  EXPECT_THROW(t.time_s("broadcast", 10), exdyna::DataError);
}

// The cells' communication is read off the sweep between the points no larger size beat: a
// stalled 64 KiB point (slower than 256 KiB) is interpolated over, not used.
TEST(Matrix, CommTableInterpolatesOverAStalledPoint) {
  CommTable t;
  t.add("allreduce", 16384, 0.002);
  t.add("allreduce", 65536, 0.020);  // stalled
  t.add("allreduce", 262144, 0.008);
  EXPECT_NEAR(t.time_s("allreduce", 65536), 0.002 + 0.006 * (65536.0 - 16384) / (262144 - 16384),
              1e-12);
  EXPECT_NEAR(t.time_s("allreduce", 262144), 0.008, 1e-12);
}

TEST(Matrix, ModelCollectivesFollowRingAndTree) {
  const double b = 1e6;  // bytes
  const double ring = model_collective_s("allreduce", 8, 1'000'000'000, 0, b);
  EXPECT_NEAR(ring, 14 * (20e-6 + b / 8 * 8e-9), 1e-12);
  EXPECT_NEAR(model_collective_s("broadcast", 8, 1'000'000'000, 30, b), 3 * (50e-6 + b * 8e-9),
              1e-12);
  EXPECT_DOUBLE_EQ(model_collective_s("allreduce", 1, 1'000'000'000, 0, b), 0);
}

// Each test's own directory for the ranks' logs, removed when it ends.
using RankLaunch = TempDirTest;

TEST_F(RankLaunch, AFailedRankFailsTheJobWithItsStderrAndTheOthersAreStopped) {
  std::vector<RankCommand> ranks(2);
  ranks[0].argv = {"/bin/sh", "-c", "echo \"boom $X\" >&2; exit 3"};
  ranks[0].env = {{"X", "from-env"}};
  ranks[1].argv = {"/bin/sleep", "600"};  // would hang the test without the launcher's kill
  const auto r = run_ranks(ranks, dir_, std::chrono::seconds(300));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_EQ(r.why, "exit 3");
  EXPECT_NE(r.stderr_tail.find("boom from-env"), std::string::npos) << r.stderr_tail;
}

TEST_F(RankLaunch, ADeadlineKillsAHungJob) {
  std::vector<RankCommand> ranks(1);
  ranks[0].argv = {"/bin/sleep", "600"};
  const auto r = run_ranks(ranks, dir_, std::chrono::milliseconds(300));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why.find("timed out"), std::string::npos) << r.why;
}

bool has_qdisc(const HostSet& h, int rank) {
  const auto r = run_tool({"tc", "-n", h.ns(rank), "qdisc", "show", "dev", "eth0"});
  return r.rc == 0;
}

TEST(HostSet, HostsExistWhileTheSetLivesAndAreGoneAfter) {
  SKIP_WITHOUT_NETNS();
  const int me = static_cast<int>(getpid());
  {
    HostSet h(3, LinkShape{100'000'000, 50, 0});
    EXPECT_EQ(namespaces_of(me).size(), 4u);  // 3 hosts + the bridge
    EXPECT_EQ(h.address(0), h.address(0));
    EXPECT_NE(h.address(0), h.address(2));
    EXPECT_TRUE(has_qdisc(h, 2));
    // exec_prefix runs a command inside the host: its eth0 has the host's address. (That ranks
    // reach each other over the bridge is the end-to-end test's part: compare_case.sh quick.)
    std::vector<std::string> argv = h.exec_prefix(1);
    argv.insert(argv.end(), {"ip", "-4", "addr", "show", "dev", "eth0"});
    EXPECT_EQ(run_tool(argv).rc, 0);
    // Two sets of one process never collide.
    HostSet other(1, LinkShape{});
    EXPECT_NE(other.prefix(), h.prefix());
    EXPECT_EQ(namespaces_of(me).size(), 6u);
  }
  EXPECT_TRUE(namespaces_of(me).empty());
}

// A child creates a set, says so on a pipe, then waits to be signalled.
pid_t child_with_hosts() {
  int p[2];
  if (pipe(p) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    try {
      HostSet h(2, LinkShape{});
      (void)!write(p[1], "r", 1);
      for (;;) pause();
    } catch (...) {
      _exit(5);
    }
  }
  close(p[1]);
  char c = 0;
  const bool ready = read(p[0], &c, 1) == 1;
  close(p[0]);
  return ready ? pid : -1;
}

TEST(HostSet, SigintRemovesTheHostsAndKillsWithTheSignal) {
  SKIP_WITHOUT_NETNS();
  const pid_t pid = child_with_hosts();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(namespaces_of(pid).size(), 3u);
  kill(pid, SIGINT);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT);
  EXPECT_TRUE(namespaces_of(pid).empty());
}

TEST(HostSet, AKilledRunLeavesAStaleSetThatTheNextStartRemoves) {
  SKIP_WITHOUT_NETNS();
  const pid_t pid = child_with_hosts();
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_EQ(namespaces_of(pid).size(), 3u);  // SIGKILL cannot be handled: the set is stale
  { HostSet next(1, LinkShape{}); }          // a new set removes it first
  EXPECT_TRUE(namespaces_of(pid).empty());
}

}  // namespace
