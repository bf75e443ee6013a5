// Unit tests of the engine layer that need no peers: the factory's plan from --backend, --workers
// and the environment, and the launcher's exit-status handling on tiny shell commands.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "exdyna/comm/engines/factory.hpp"
#include "exdyna/comm/engines/gloo_communicator.hpp"
#include "exdyna/comm/engines/launcher.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::comm {
namespace {

// Clears the launcher variables for one test and restores nothing: each test sets what it needs.
class Env : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "RANK", "WORLD_SIZE",
                          "EXDYNA_GLOO_LOG_BELOW"})
      unsetenv(v);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(Env, ParsesBackends) {
  EXPECT_EQ(parse_backend("auto"), Backend::kAuto);
  EXPECT_EQ(parse_backend("mpi"), Backend::kMpi);
  EXPECT_EQ(parse_backend("gloo"), Backend::kGloo);
  EXPECT_EQ(parse_backend("local"), Backend::kLocal);
  try {
    parse_backend("nccl");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'nccl'"), std::string::npos);
  }
}

TEST_F(Env, AutoWithoutLauncherLaunchesOrRunsInProcess) {
  EXPECT_EQ(plan_engine(Backend::kAuto, 1), Plan::kInProcess);
  if (have_gloo()) EXPECT_EQ(plan_engine(Backend::kAuto, 4), Plan::kLaunch);
  EXPECT_EQ(plan_engine(Backend::kLocal, 4), Plan::kInProcess);
  EXPECT_THROW(plan_engine(Backend::kAuto, 0), InvalidArgument);
}

TEST_F(Env, AutoPicksMpiUnderMpirunAndGlooUnderTorchrun) {
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  if (have_mpi()) {
    EXPECT_EQ(plan_engine(Backend::kAuto, 1), Plan::kConnectMpi);
    EXPECT_EQ(plan_engine(Backend::kAuto, 4), Plan::kConnectMpi);
    EXPECT_THROW(plan_engine(Backend::kAuto, 3), InvalidArgument);  // --workers disagrees
  }
  SetUp();
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  if (have_gloo()) {
    EXPECT_EQ(plan_engine(Backend::kAuto, 1), Plan::kConnectGloo);
    EXPECT_EQ(plan_engine(Backend::kGloo, 2), Plan::kConnectGloo);
    EXPECT_THROW(plan_engine(Backend::kGloo, 5), InvalidArgument);
  }
}

#ifdef EXDYNA_HAVE_GLOO
// EXDYNA_GLOO_LOG_BELOW: measured by default, the ring everywhere, one switch or one per operation.
TEST_F(Env, GlooReadsTheAlgorithmSwitch) {
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_FALSE(GlooConfig::from_env().algorithm_switch.has_value());
  const auto read = [](const char* v) {
    setenv("EXDYNA_GLOO_LOG_BELOW", v, 1);
    return GlooConfig::from_env().algorithm_switch;
  };
  EXPECT_FALSE(read("auto").has_value());
  auto s = read("ring");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->allreduce_below, 0);
  EXPECT_EQ(s->allgather_below, 0);
  s = read("64K");
  EXPECT_EQ(s->allreduce_below, 65536);
  EXPECT_EQ(s->allgather_below, 65536);
  s = read("4096,1M");
  EXPECT_EQ(s->allreduce_below, 4096);
  EXPECT_EQ(s->allgather_below, 1 << 20);
  for (const char* bad : {"fast", "-1", "4K,", "4K,x", "12Q", ",4K"}) {
    try {
      read(bad);
      FAIL() << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("EXDYNA_GLOO_LOG_BELOW='") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
}
#endif

TEST_F(Env, MpiOutsideMpirunNeedsOneWorker) {
  if (!have_mpi()) GTEST_SKIP();
  EXPECT_EQ(plan_engine(Backend::kMpi, 1), Plan::kConnectMpi);  // a singleton
  try {
    plan_engine(Backend::kMpi, 4);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np 4"), std::string::npos) << e.what();
  }
}

TEST(Launcher, ReportsTheFirstFailingRankAndItsCode) {
  LaunchOptions o;
  o.workers = 3;
  o.exe = "/bin/sh";
  // Rank 1 fails at once with 7; the others succeed later.
  o.argv = {"sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 7; fi; sleep 0.3; exit 0"};
  o.timeout = std::chrono::milliseconds(2000);
  o.grace = std::chrono::milliseconds(200);
  EXPECT_EQ(launch_local(o), 7);
}

TEST(Launcher, AllSucceedGivesZeroAndEndsAStuckWorker) {
  LaunchOptions o;
  o.workers = 2;
  o.exe = "/bin/sh";
  o.argv = {"sh", "-c", "test \"$WORLD_SIZE\" = 2 && test -n \"$MASTER_PORT\" && exit 0; exit 1"};
  EXPECT_EQ(launch_local(o), 0);
  // Rank 0 fails; rank 1 never ends on its own and is terminated (128 + SIGTERM is not rank 0's
  // code).
  o.argv = {"sh", "-c", "if [ \"$RANK\" = 0 ]; then exit 3; fi; exec sleep 100"};
  o.timeout = std::chrono::milliseconds(500);
  o.grace = std::chrono::milliseconds(200);
  EXPECT_EQ(launch_local(o), 3);
}

}  // namespace
}  // namespace exdyna::comm

namespace exdyna::comm {
namespace {

TEST(Launcher, DoesNotWaitForADescendantHoldingThePipe) {
  LaunchOptions o;
  o.workers = 1;
  o.exe = "/bin/sh";
  // The worker exits at once but leaves a background child holding its stdout for 100 s; without
  // the drain limit the launcher would wait for it and the test would hit CTest's 60 s timeout.
  o.argv = {"sh", "-c", "sleep 100 & exit 0"};
  EXPECT_EQ(launch_local(o), 0);
}

}  // namespace
}  // namespace exdyna::comm
