// What a training run writes of its statistics: iterations.csv has training's own columns, then
// the list of StepStats fields; summary.json the mean of every scalar statistic by the same name.
#include "exdyna/train/metrics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "exdyna/sparsifiers/step_stats_fields.hpp"
#include "exdyna/train/train_report.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace exdyna::train {
namespace {

constexpr std::int64_t kBeyondDouble = (std::int64_t{1} << 53) + 1;  // printed exactly or not

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, sep);) out.push_back(f);
  return out;
}

IterRecord record(std::int64_t step) {
  IterRecord r;
  r.step = step;
  r.loss = 1.0 / static_cast<double>(step + 1);
  r.stats.iteration = step;
  r.stats.world_size = 2;
  r.stats.n_g = kBeyondDouble;
  r.stats.k_per_worker = {3, 5};
  r.stats.finish_counts();
  r.stats.bytes.allreduce = 8 * static_cast<std::uint64_t>(step);
  r.stats.times.select = 0.25;
  return r;  // threshold stays NaN, as for a sparsifier without one
}

TEST(IterationCsv, TrainingColumnsThenTheListOfStatistics) {
  RunLog log;
  log.add(record(0));
  log.add(record(1));
  const auto rows = split(log.iteration_csv(), '\n');
  ASSERT_EQ(rows.size(), 3u);
  std::vector<std::string> want = {"step", "epoch",     "wall_s",     "loss",
                                   "lr",   "t_compute", "t_optimizer"};
  for (const auto& c : sparsifiers::step_stat_columns(2)) want.push_back(c);
  const auto header = split(rows[0], ',');
  EXPECT_EQ(header, want);
  const auto at = [&](std::size_t row, const std::string& column) {
    const auto c = std::find(header.begin(), header.end(), column) - header.begin();
    return split(rows[row], ',').at(static_cast<std::size_t>(c));
  };
  EXPECT_EQ(at(2, "iteration"), "1");
  EXPECT_EQ(at(2, "n_g"), std::to_string(kBeyondDouble));
  EXPECT_EQ(at(2, "threshold"), "nan");
  EXPECT_EQ(at(2, "bytes_allreduce"), "8");
  EXPECT_EQ(at(2, "t_select"), "0.25");
  EXPECT_EQ(at(2, "k_w1"), "5");
  EXPECT_EQ(at(2, "alloc_w0"), "-1");
}

using RunFiles = TempDirTest;

TEST_F(RunFiles, SummaryHasTheMeanOfEveryScalarStatistic) {
  TrainOptions o;
  o.out_dir = dir_.string();
  o.plots = false;
  TrainResult r;
  r.log.add(record(0));
  r.log.add(record(1));
  write_run_files(o, 2, "local", 2, r);
  const auto j = nlohmann::json::parse(read_file(dir_ / "summary.json"));
  const auto& m = j.at("step_means");
  for (const auto& c : sparsifiers::step_scalar_columns()) EXPECT_TRUE(m.contains(c)) << c;
  EXPECT_EQ(m.size(), sparsifiers::step_scalar_columns().size());
  EXPECT_EQ(m.at("iteration").get<double>(), 0.5);
  EXPECT_EQ(m.at("bytes_allreduce").get<double>(), 4.0);
  EXPECT_EQ(m.at("k_total").get<double>(), 8.0);
  EXPECT_TRUE(m.at("threshold").is_null()) << "NaN is written as null";
  EXPECT_EQ(j.at("mean_bytes_per_iteration"), m.at("bytes_total"));
}

}  // namespace
}  // namespace exdyna::train
