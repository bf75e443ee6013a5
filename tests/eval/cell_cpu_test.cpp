// The CPU times compare charges a cell from its ranks' per-iteration statistics.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/eval/cell_cpu.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace {

namespace fs = std::filesystem;
using namespace exdyna::eval;

struct Iter {
  double cpu, cpu_comm, select_cpu;
};

class CellCpu : public TempDirTest {
 protected:
  CellCpu() : TempDirTest("exdyna_cell_cpu_") {}
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "logs");
  }
  // Rank r's stats file with one row per iteration, iterations 0, 1, ...
  void write(int r, const std::vector<Iter>& its, bool with_cpu_columns = true) {
    const fs::path p =
        r == 0 ? dir_ / "stats.csv" : dir_ / "logs" / ("stats-r" + std::to_string(r) + ".csv");
    std::ofstream f(p);
    f << "iteration,t_cpu,t_non_comm,t_select"
      << (with_cpu_columns ? ",t_cpu_comm,t_select_cpu" : "") << "\n";
    for (std::size_t i = 0; i < its.size(); ++i) {
      f << i << ',' << its[i].cpu << ',' << 2 * its[i].cpu << ',' << 2 * its[i].select_cpu;
      if (with_cpu_columns) f << ',' << its[i].cpu_comm << ',' << its[i].select_cpu;
      f << '\n';
    }
  }
};

TEST_F(CellCpu, TheMedianOfTheSlowestRankPerIterationLessItsTimeInCollectives) {
  // Warm-up 2 (iterations 0-1 dropped, however slow); measured 2, 3, 4.
  write(0, {{9, 0, 9}, {9, 0, 9}, {0.10, 0.01, 0.02}, {0.30, 0.01, 0.05}, {0.12, 0.02, 0.03}});
  write(1, {{9, 0, 9}, {9, 0, 9}, {0.20, 0.05, 0.04}, {0.21, 0.01, 0.06}, {0.50, 0.01, 0.07}});
  const auto ranks = read_run_stats(dir_, 2, 2);
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].rows, 3u);
  const IterationCpu c = median_iteration(ranks);
  // Rank 0's non-comm: 0.09, 0.29, 0.10; rank 1's: 0.15, 0.20, 0.49. The slowest per iteration:
  // 0.15, 0.29 (rank 0: a rotating role such as CLT-k's leader), 0.49 -> 0.29. (Each rank's
  // median first would give max(0.10, 0.20) = 0.20 and miss the role.)
  EXPECT_NEAR(c.non_comm_s, 0.29, 1e-12);
  EXPECT_NEAR(c.select_s, 0.05, 1e-12);  // that rank's selection in that iteration
  EXPECT_EQ(c.row, 1u);
}

TEST_F(CellCpu, AnEvenCountTakesTheLowerMiddle) {
  write(0, {{0.4, 0, 0.1}, {0.1, 0, 0.1}, {0.3, 0, 0.1}, {0.2, 0, 0.1}});
  EXPECT_NEAR(median_iteration(read_run_stats(dir_, 1, 0)).non_comm_s, 0.2, 1e-12);
}

TEST_F(CellCpu, OlderStatisticsDeflateTheSelectionsWallTime) {
  // No t_cpu_comm / t_select_cpu: the selection's wall time (2x) over the rank's wall/CPU ratio
  // (2).
  write(0, {{0.10, 0, 0.03}}, false);
  const IterationCpu c = median_iteration(read_run_stats(dir_, 1, 0));
  EXPECT_NEAR(c.non_comm_s, 0.10, 1e-12);
  EXPECT_NEAR(c.select_s, 0.03, 1e-12);
}

TEST_F(CellCpu, RanksWithoutAFileAreSkippedAndAWarmUpPastTheEndIsAnError) {
  write(0, {{0.1, 0, 0.01}, {0.2, 0, 0.01}});
  EXPECT_EQ(read_run_stats(dir_, 4, 0).size(), 1u);  // the model network writes rank 0's only
  EXPECT_THROW(read_run_stats(dir_, 1, 2), exdyna::DataError);
  std::ofstream(dir_ / "stats.csv") << "iteration,t_cpu,t_non_comm,t_select\n0,0.1,fast,0.1\n";
  EXPECT_THROW(read_run_stats(dir_, 1, 0), exdyna::DataError);
}

}  // namespace
