// The parallel trace recorder: ranks of an in-process group write their own slices of one trace
// that TraceSource reads back exactly; an unfinished or inconsistent recording has no meta.json; a
// used directory is refused on every rank and left untouched.
#include "exdyna/sim/trace_recorder.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sim/trace_source.hpp"
#include "unit/expect_error.hpp"
#include "unit/temp_dir_test_base.hpp"

using namespace exdyna;
using namespace exdyna::sim;
namespace fs = std::filesystem;

namespace {

// Rank r's gradient of call t: exact small integers in float, distinct for every (t, r, i).
std::vector<float> gradient(std::int64_t t, int r, std::int64_t n_g) {
  std::vector<float> g(static_cast<std::size_t>(n_g));
  for (std::int64_t i = 0; i < n_g; ++i)
    g[static_cast<std::size_t>(i)] = static_cast<float>(t * 100000 + r * 1000 + i) * 0.5f;
  return g;
}

class TraceRecorderTest : public TempDirTest {
 protected:
  TraceRecorderTest() : TempDirTest("exdyna_recorder_") {}
  fs::path trace() const { return dir_ / "trace"; }

  // Every rank records `calls` gradients with a recorder of `steps` steps, then finishes.
  TraceMeta record(int world, std::int64_t n_g, std::int64_t steps, std::int64_t calls) {
    std::vector<TraceMeta> metas(static_cast<std::size_t>(world));
    comm::run_local(world, [&](comm::Communicator& c) {
      TraceRecorder rec(trace(), steps, c);
      for (std::int64_t t = 0; t < calls; ++t) rec.record(gradient(t, c.rank(), n_g));
      metas[static_cast<std::size_t>(c.rank())] = rec.finish();
    });
    for (const auto& m : metas) {
      EXPECT_EQ(m.n_g, metas[0].n_g);
      EXPECT_EQ(m.iterations, metas[0].iterations);
    }
    return metas[0];
  }

  // Checks that the trace holds exactly `iterations` iterations of gradient(t, r, n_g).
  void expect_trace(int world, std::int64_t n_g, std::int64_t iterations) {
    TraceSource src(trace());
    EXPECT_EQ(src.n_g(), n_g);
    EXPECT_EQ(src.workers(), world);
    EXPECT_EQ(src.iterations(), iterations);
    EXPECT_EQ(fs::file_size(trace() / kTraceDataFile),
              static_cast<std::uintmax_t>(iterations * world * n_g * 4));
    std::vector<float> got(static_cast<std::size_t>(n_g));
    for (std::int64_t t = 0; t < iterations; ++t)
      for (int r = 0; r < world; ++r) {
        src.fill(t, r, got);
        EXPECT_EQ(got, gradient(t, r, n_g)) << "iteration " << t << ", worker " << r;
      }
  }

  template <typename E>
  void expect_message(const std::function<void()>& f, std::initializer_list<std::string> parts) {
    expect_error<E>(f, parts);
  }
};

}  // namespace

TEST_F(TraceRecorderTest, RanksWriteTheirSlicesAndTraceSourceReadsThemBack) {
  for (int world : {1, 2, 3, 5}) {
    fs::remove_all(trace());
    const auto m = record(world, 257, 4, 7);  // 7 calls, the first 4 recorded
    EXPECT_EQ(m.n_g, 257);
    EXPECT_EQ(m.workers, world);
    EXPECT_EQ(m.iterations, 4);
    expect_trace(world, 257, 4);
  }
}

TEST_F(TraceRecorderTest, StepsZeroRecordsEveryCall) {
  EXPECT_EQ(record(3, 33, 0, 5).iterations, 5);
  expect_trace(3, 33, 5);
}

TEST_F(TraceRecorderTest, ARunShorterThanStepsGivesTheIterationsItDid) {
  EXPECT_EQ(record(2, 16, 100, 3).iterations, 3);
  expect_trace(2, 16, 3);
}

TEST_F(TraceRecorderTest, AnExistingEmptyDirectoryIsUsed) {
  fs::create_directories(trace());
  record(2, 8, 2, 2);
  expect_trace(2, 8, 2);
}

TEST_F(TraceRecorderTest, AnUnfinishedRecordingHasNoMetaAndIsRefused) {
  comm::run_local(2, [&](comm::Communicator& c) {
    TraceRecorder rec(trace(), 10, c);
    for (std::int64_t t = 0; t < 3; ++t) rec.record(gradient(t, c.rank(), 64));
    // Destroyed without finish(), as when the job dies.
  });
  EXPECT_TRUE(fs::exists(trace() / kTraceDataFile));
  EXPECT_FALSE(fs::exists(trace() / kTraceMetaFile));
  EXPECT_THROW(TraceSource src(trace()), InvalidArgument);
  // And the directory is not reused for a new recording.
  expect_message<InvalidArgument>([&] { prepare_trace_dir(trace()); },
                                  {trace().string(), "not empty", "grads.f32"});
}

TEST_F(TraceRecorderTest, AUsedDirectoryIsRefusedOnEveryRankAndLeftAlone) {
  fs::create_directories(trace());
  std::ofstream(trace() / "notes.txt") << "keep me\n";
  std::vector<std::string> errors(3);
  comm::run_local(3, [&](comm::Communicator& c) {
    try {
      TraceRecorder rec(trace(), 5, c);
    } catch (const InvalidArgument& e) {
      errors[static_cast<std::size_t>(c.rank())] = e.what();
    }
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("not empty"), std::string::npos) << e;
    EXPECT_NE(e.find("notes.txt"), std::string::npos) << e;
  }
  EXPECT_FALSE(fs::exists(trace() / kTraceDataFile));
  std::string kept;
  std::getline(std::ifstream(trace() / "notes.txt"), kept);
  EXPECT_EQ(kept, "keep me");
}

TEST_F(TraceRecorderTest, BadDirectoriesAndStepsAreRefused) {
  std::ofstream(dir_ / "file") << "x";
  expect_message<InvalidArgument>([&] { prepare_trace_dir(dir_ / "file"); },
                                  {"file", "is not a directory"});
  expect_message<InvalidArgument>([&] { prepare_trace_dir(dir_ / "file" / "sub"); },
                                  {"file/sub", "cannot be created"});
  expect_message<InvalidArgument>(
      [&] { comm::run_local(1, [&](comm::Communicator& c) { TraceRecorder r(trace(), -1, c); }); },
      {"steps -1", "expected >= 0"});
  EXPECT_FALSE(fs::exists(trace())) << "refused before touching the file system";
}

TEST_F(TraceRecorderTest, RanksThatDisagreeGetNoMeta) {
  expect_message<DataError>(
      [&] {
        comm::run_local(2, [&](comm::Communicator& c) {
          TraceRecorder rec(trace(), 10, c);
          const std::int64_t calls = c.rank() == 1 ? 2 : 3;
          for (std::int64_t t = 0; t < calls; ++t) rec.record(gradient(t, c.rank(), 8));
          rec.finish();
        });
      },
      {"rank 1 recorded 2", "rank 0 3", "no meta.json"});
  EXPECT_FALSE(fs::exists(trace() / kTraceMetaFile));
}

TEST_F(TraceRecorderTest, NothingRecordedIsAnErrorWithoutMeta) {
  expect_message<Error>(
      [&] {
        comm::run_local(2, [&](comm::Communicator& c) {
          TraceRecorder rec(trace(), 10, c);
          rec.finish();
        });
      },
      {"no step was recorded"});
  EXPECT_FALSE(fs::exists(trace() / kTraceMetaFile));
}

TEST_F(TraceRecorderTest, AGradientOfAnotherLengthIsRefused) {
  comm::run_local(1, [&](comm::Communicator& c) {
    TraceRecorder rec(trace(), 10, c);
    rec.record(gradient(0, 0, 8));
    expect_message<InvalidArgument>([&] { rec.record(gradient(1, 0, 9)); },
                                    {"9 elements", "n_g = 8"});
  });
}
