// A gtest fixture base owning a fresh directory per test (named after the test and the pid, so
// parallel CTest runs never share one), removed when the test ends.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

// The whole content of file p ("" when it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class TempDirTest : public ::testing::Test {
 protected:
  // Without a prefix the directory is named after the suite as well, so a suite that needs nothing
  // else of its fixture can be an alias: using IdxReader = TempDirTest;
  TempDirTest() = default;
  explicit TempDirTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string prefix =
        prefix_.empty() ? "exdyna-" + std::string(info->test_suite_name()) + "-" : prefix_;
    dir_ = std::filesystem::temp_directory_path() /
           (prefix + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!(keep_on_failure_ && HasFailure())) std::filesystem::remove_all(dir_);
  }

  std::string prefix_;
  std::filesystem::path dir_;
  // Leave a failed test's directory for inspection (its outputs are what the failure is about).
  bool keep_on_failure_ = false;
};
