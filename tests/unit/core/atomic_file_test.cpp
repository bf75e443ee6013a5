// core::write_file_atomic: replaces the whole file or leaves the old one, never a temporary.
#include "exdyna/core/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "exdyna/core/error.hpp"
#include "unit/expect_error.hpp"
#include "unit/temp_dir_test_base.hpp"

using exdyna::core::write_file_atomic;
namespace fs = std::filesystem;

namespace {

class AtomicFile : public TempDirTest {
 protected:
  AtomicFile() : TempDirTest("exdyna_atomic_file_") {}
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
};

TEST_F(AtomicFile, WritesAndReplacesWithUsualPermissions) {
  const auto p = dir_ / "out.txt";
  write_file_atomic(p, "first\n");
  EXPECT_EQ(read_file(p), "first\n");
  write_file_atomic(p, std::string(100000, 'x'));
  EXPECT_EQ(read_file(p), std::string(100000, 'x'));
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  EXPECT_EQ(names(), std::vector<std::string>{"out.txt"});
}

// A write that fails half-way (the file-size limit stops it) keeps the old file whole and leaves
// no temporary behind; the error names the path.
TEST_F(AtomicFile, FailedWriteKeepsOldFileAndNoTemporary) {
  const auto p = dir_ / "keep.csv";
  write_file_atomic(p, "old\n");
  std::signal(SIGXFSZ, SIG_IGN);  // the limit then fails write() with EFBIG instead of a signal
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  expect_error<exdyna::Error>([&] { write_file_atomic(p, std::string(4096, 'n')); }, {p.string()});
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_EQ(read_file(p), "old\n");
  EXPECT_EQ(names(), std::vector<std::string>{"keep.csv"});
}

TEST_F(AtomicFile, RefusesMissingDirectoryAndDirectoryTarget) {
  fs::create_directories(dir_ / "sub");
  expect_error<exdyna::Error>([&] { write_file_atomic(dir_ / "sub", "x"); },
                              {(dir_ / "sub").string()});
  expect_error<exdyna::Error>([&] { write_file_atomic(dir_ / "missing" / "f", "x"); },
                              {(dir_ / "missing" / "f").string()});
  EXPECT_TRUE(fs::is_directory(dir_ / "sub"));
  EXPECT_EQ(names(), std::vector<std::string>{"sub"});
}

}  // namespace
