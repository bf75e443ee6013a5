// Trace directories: round trip through the writer, and every malformed trace refused by name.
#include <gtest/gtest.h>

#include <unistd.h>
#include "unit/expect_error.hpp"
#include "unit/temp_dir_test_base.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/sim/synthetic_source.hpp"
#include "exdyna/sim/trace_source.hpp"

using namespace exdyna;
using namespace exdyna::sim;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the test temp dir, removed at the end of the test.
class TraceTest : public TempDirTest {
 protected:
  TraceTest() : TempDirTest("exdyna_trace_") {}

  void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }
  void write_floats(const fs::path& p, std::size_t n, float v = 0.5f) {
    std::vector<float> x(n, v);
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(n * 4));
  }
  // Expects TraceSource(dir_) to throw E with every one of `parts` in its message.
  template <typename E>
  void expect_refused(std::initializer_list<std::string> parts) {
    expect_error<E>([&] { TraceSource t(dir_); }, parts);
  }
};

}  // namespace

TEST_F(TraceTest, RoundTripThroughTheWriterIsBitExact) {
  SyntheticOptions o;
  o.n_g = 1001;  // odd on purpose
  o.layers = 5;
  SyntheticSource src(o);
  write_trace(dir_, src, 3, 4);
  TraceSource t(dir_);
  EXPECT_EQ(t.n_g(), 1001);
  EXPECT_EQ(t.workers(), 3);
  EXPECT_EQ(t.iterations(), 4);
  EXPECT_EQ(fs::file_size(dir_ / "grads.f32"), 4u * 3 * 1001 * 4);
  std::vector<float> want(1001);
  // Concurrent readers, one per worker, in reverse order of iterations.
  std::vector<std::thread> th;
  std::vector<int> bad(3, 0);
  for (int w = 0; w < 3; ++w)
    th.emplace_back([&, w] {
      std::vector<float> got(1001), exp(1001);
      for (std::int64_t it = 3; it >= 0; --it) {
        t.fill(it, w, got);
        SyntheticSource again(o);
        again.fill(it, w, exp);
        if (got != exp) ++bad[static_cast<std::size_t>(w)];
      }
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(bad, std::vector<int>(3, 0));
  // The layout is [iteration][worker][n_g], little-endian float32.
  std::ifstream raw(dir_ / "grads.f32", std::ios::binary);
  raw.seekg(static_cast<std::streamoff>(((2 * 3 + 1) * 1001 + 17) * 4));
  float v = 0;
  raw.read(reinterpret_cast<char*>(&v), 4);
  src.fill(2, 1, want);
  EXPECT_EQ(v, want[17]);
}

TEST_F(TraceTest, FillOutsideTheTraceIsRefused) {
  write_text(dir_ / "meta.json", R"({"n_g": 4, "workers": 2, "iterations": 3})");
  write_floats(dir_ / "grads.f32", 3 * 2 * 4);
  TraceSource t(dir_);
  std::vector<float> g(4);
  t.fill(2, 1, g);
  EXPECT_EQ(g, std::vector<float>(4, 0.5f));
  EXPECT_THROW(t.fill(3, 0, g), InvalidArgument);
  EXPECT_THROW(t.fill(0, 2, g), InvalidArgument);
  std::vector<float> short_buf(3);
  EXPECT_THROW(t.fill(0, 0, short_buf), InvalidArgument);
}

TEST_F(TraceTest, ExtraMetaKeysAreIgnored) {
  write_text(dir_ / "meta.json", R"({"n_g": 4, "workers": 1, "iterations": 1, "model": "resnet"})");
  write_floats(dir_ / "grads.f32", 4);
  EXPECT_NO_THROW(TraceSource t(dir_));
}

TEST_F(TraceTest, MissingDirectory) {
  fs::remove_all(dir_);
  expect_refused<InvalidArgument>({dir_.string(), "does not exist"});
}

TEST_F(TraceTest, MissingMeta) {
  write_floats(dir_ / "grads.f32", 4);
  expect_refused<InvalidArgument>({(dir_ / "meta.json").string(), "cannot be opened"});
}

TEST_F(TraceTest, MetaIsNotJson) {
  write_text(dir_ / "meta.json", R"({"n_g": 4, "workers": )");
  write_floats(dir_ / "grads.f32", 4);
  expect_refused<DataError>({(dir_ / "meta.json").string(), "not valid JSON"});
}

TEST_F(TraceTest, MetaIsNotAnObject) {
  write_text(dir_ / "meta.json", "[4, 1, 1]");
  expect_refused<DataError>({(dir_ / "meta.json").string(), "array", "expected an object"});
}

TEST_F(TraceTest, MetaFieldMissing) {
  write_text(dir_ / "meta.json", R"({"n_g": 4, "iterations": 1})");
  expect_refused<DataError>({"meta.json", "\"workers\" is missing"});
}

TEST_F(TraceTest, MetaFieldMistyped) {
  write_text(dir_ / "meta.json", R"({"n_g": "4", "workers": 1, "iterations": 1})");
  expect_refused<DataError>({"meta.json", "\"n_g\" is \"4\"", "expected a positive integer"});
  write_text(dir_ / "meta.json", R"({"n_g": 4, "workers": 1.5, "iterations": 1})");
  expect_refused<DataError>({"meta.json", "\"workers\" is 1.5"});
}

TEST_F(TraceTest, MetaFieldNotPositive) {
  write_text(dir_ / "meta.json", R"({"n_g": 0, "workers": 1, "iterations": 1})");
  expect_refused<DataError>({"meta.json", "\"n_g\" is 0", "expected 1.."});
  write_text(dir_ / "meta.json", R"({"n_g": 4, "workers": 1, "iterations": -3})");
  expect_refused<DataError>({"meta.json", "\"iterations\" is -3"});
  write_text(dir_ / "meta.json", R"({"n_g": 4294967296, "workers": 1, "iterations": 1})");
  expect_refused<DataError>({"meta.json", "\"n_g\" is 4294967296"});
}

TEST_F(TraceTest, DataFileMissing) {
  write_text(dir_ / "meta.json", R"({"n_g": 4, "workers": 1, "iterations": 1})");
  expect_refused<InvalidArgument>({(dir_ / "grads.f32").string(), "cannot be opened"});
}

TEST_F(TraceTest, DataShorterThanMetaSays) {
  write_text(dir_ / "meta.json", R"({"n_g": 10, "workers": 2, "iterations": 3})");
  write_floats(dir_ / "grads.f32", 10 * 2 * 3 - 1);
  expect_refused<DataError>(
      {(dir_ / "grads.f32").string(), "has 236 bytes", "says 240 bytes", "shorter"});
}

TEST_F(TraceTest, DataLongerThanMetaSays) {
  write_text(dir_ / "meta.json", R"({"n_g": 10, "workers": 2, "iterations": 3})");
  write_floats(dir_ / "grads.f32", 10 * 2 * 3 + 10);
  expect_refused<DataError>({"has 280 bytes", "says 240 bytes", "longer"});
}

TEST_F(TraceTest, WriterLeavesNoMetaForAnUnfinishedTrace) {
  write_text(dir_ / "meta.json", R"({"n_g": 4, "workers": 2, "iterations": 1})");  // an old trace
  TraceWriter w(dir_, 4, 2);
  std::vector<float> g(4, 1.0f);
  w.append(g);  // half an iteration
  EXPECT_THROW(w.finish(), InvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "meta.json"));
  expect_refused<InvalidArgument>({"meta.json"});
  std::vector<float> wrong(3);
  EXPECT_THROW(w.append(wrong), InvalidArgument);
}
