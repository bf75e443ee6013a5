// The report on a tiny matrix: report.md names the fastest label computed from the data, every
// figure it references is a non-empty PNG, a missing efficiency.csv is reported and not fatal,
// and the training-efficiency part (real `exdyna train` runs) writes efficiency.csv.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "exdyna/core/error.hpp"
#include "exdyna/eval/efficiency.hpp"
#include "exdyna/eval/measurements.hpp"
#include "exdyna/eval/report.hpp"
#include "fixtures.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace exdyna::eval {
namespace {

namespace fs = std::filesystem;
using testing::exdyna_tool;

bool gnuplot_available() {
  return std::system("command -v gnuplot > /dev/null 2>&1") == 0;
}

// Two settings (W = 2 and 4 at 1 Gbit/s, d = 0.01) of four labels; at W = 4 exdyna-exact is the
// fastest, at W = 2 topk is (so the report must say exdyna-exact is not the fastest there).
void write_tiny_matrix(const fs::path& dir) {
  using testing::FixtureCell;
  const std::vector<FixtureCell> cells = {
      {"dense", "dense", 2, 1e9, 0.01, 80, 0, 68, 100, 1, 1},
      {"topk", "topk", 2, 1e9, 0.01, 20, 4, 5, 2, 1, 3},
      {"exdyna", "exdyna-paper", 2, 1e9, 0.01, 26, 0.2, 4, 1.3, 1.2},  // (no column value)
      {"exdyna", "exdyna-exact", 2, 1e9, 0.01, 24, 0.2, 3, 1.0, 1.05, 4, 0.0},
      {"dense", "dense", 4, 1e9, 0.01, 130, 0, 118, 100, 1, 1},
      {"topk", "topk", 4, 1e9, 0.01, 31, 4, 15, 4, 1, 3},
      {"exdyna", "exdyna-paper", 4, 1e9, 0.01, 21, 0.1, 8, 1.3, 1.4},
      {"exdyna", "exdyna-exact", 4, 1e9, 0.01, 17, 0.1, 6, 1.0, 1.1, 3.5, 0.5},
  };
  testing::write(dir / "cells.csv", testing::cells_csv(cells));
  testing::write(dir / "comm.csv", testing::synthetic_comm(1e9, testing::kAlpha, testing::kBeta));
  // Two cells' per-iteration statistics, one with cell.json, one found by its directory name.
  testing::write(dir / "cells" / "c1" / "stats.csv", testing::stats_csv(30, 0.01, 1.0, 1.1, 0.02));
  testing::write(dir / "cells" / "c1" / "cell.json",
                 R"({"label":"exdyna-exact","workers":4,"bandwidth_bps":1e9,"density":0.01})");
  testing::write(dir / "cells" / "topk-w4-b1gbit-d0.01" / "stats.csv",
                 testing::stats_csv(30, 0.01, 4.0, 1.0, NAN));
}

// Each test's own directory, left in place when the test fails: the report and the files it was
// made from are what the failure is about.
class Report : public TempDirTest {
 protected:
  Report() : TempDirTest("exdyna_eval_report_") { keep_on_failure_ = true; }
};
using Efficiency = Report;

TEST_F(Report, TinyMatrixNamesTheFastestAndDrawsEveryFigure) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
  write_tiny_matrix(dir_);
  ReportOptions o;
  o.command_line = "exdyna compare --workers 2,4 --bandwidth 1gbit --density 0.01";
  const auto res = write_report(dir_, o);
  ASSERT_TRUE(fs::exists(dir_ / "report.md"));
  const auto md = read_file(dir_ / "report.md");
  // The summary rows, computed from cells.csv: fastest per setting and the ratios.
  EXPECT_NE(md.find("| 4 | 1 Gbit/s | 0.01 | 1000000 | **exdyna-exact** | 17.000 | "
                    "exdyna-paper (1.24x) | 7.65x |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 2 | 1 Gbit/s | 0.01 | 1000000 | **topk** | 20.000 |"), std::string::npos);
  EXPECT_NE(md.find("exdyna-exact is the fastest in 1 of the 2 settings"), std::string::npos);
  // Collective calls per label, from the cells that have them (exdyna-paper's have none).
  // and the fused all-gather's share (a label without it: "-").
  EXPECT_NE(md.find("| dense | 1.00 | - | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| exdyna-exact | 3.50 - 4.00 | 0.00 - 0.50 | 2 |"), std::string::npos);
  EXPECT_NE(md.find("| topk | 3.00 | - | 2 |"), std::string::npos);
  EXPECT_NE(md.find("**exdyna-exact is not the fastest**; topk is, 1.20x faster"),
            std::string::npos);
  // Missing efficiency.csv: said in the report, not fatal.
  EXPECT_NE(md.find("`efficiency.csv` is missing"), std::string::npos);
  bool noted = false;
  for (const auto& n : res.notes) noted = noted || n.find("efficiency.csv") != std::string::npos;
  EXPECT_TRUE(noted);
  // Every referenced figure exists and is a PNG, with its CSV and script beside it.
  const std::regex ref(R"(\]\((fig-[^)]+\.png)\))");
  int refs = 0;
  for (auto it = std::sregex_iterator(md.begin(), md.end(), ref); it != std::sregex_iterator();
       ++it, ++refs) {
    const auto png = dir_ / (*it)[1].str();
    SCOPED_TRACE(png.string());
    ASSERT_TRUE(fs::exists(png));
    const auto bytes = read_file(png);
    ASSERT_GT(bytes.size(), 1000u);
    EXPECT_EQ(bytes.substr(1, 3), "PNG");
    const auto stem = png.string().substr(0, png.string().size() - 4);
    EXPECT_TRUE(fs::exists(stem + ".csv"));
    EXPECT_TRUE(fs::exists(stem + ".gp"));
  }
  // breakdown, select, density, f(t), threshold, predicted-vs-measured, 3 model curves.
  EXPECT_EQ(refs, 9);
  EXPECT_EQ(res.figures.size(), 9u);
  EXPECT_TRUE(fs::exists(dir_ / "model.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "model_fit.csv"));
  EXPECT_NE(md.find("within +-20 %"), std::string::npos);
}

TEST_F(Report, CombinesEfficiencyWithTheEmulatedIterationTime) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
  write_tiny_matrix(dir_);
  // dense reaches 0.80 at step 100: target 0.98 * 0.80 = 0.784.
  testing::write(dir_ / "efficiency.csv",
                 "workload,label,step,epoch,metric,value\n"
                 "cnn,dense,50,1,test_accuracy,0.70\ncnn,dense,100,2,test_accuracy,0.80\n"
                 "cnn,topk,50,1,test_accuracy,0.68\ncnn,topk,100,2,test_accuracy,0.79\n"
                 "cnn,exdyna-exact,50,1,test_accuracy,0.79\n"
                 "cnn,exdyna-exact,100,2,test_accuracy,0.81\n"
                 // The LSTM: perplexity, lower is better; target 1.05 x 700 = 735.
                 "lstm,dense,19,1,perplexity,1000\nlstm,dense,38,2,perplexity,700\n"
                 "lstm,topk,19,1,perplexity,1200\nlstm,topk,38,2,perplexity,720\n");
  const auto res = write_report(dir_, {});
  const auto md = read_file(dir_ / "report.md");
  EXPECT_EQ(md.find("`efficiency.csv` is missing"), std::string::npos);
  // time = iterations x iteration time at 4 workers, 1 Gbit/s, d = 0.01: 100 x 31 ms, 50 x 17 ms.
  EXPECT_NE(md.find("| topk | 0.79 | 100 | 31.000 | 3.10 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| exdyna-exact | 0.81 | 50 | 17.000 | 0.85 |"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir_ / "fig-accuracy-time-cnn.png"));
  EXPECT_TRUE(fs::exists(dir_ / "fig-time-to-accuracy-cnn.png"));
  EXPECT_NE(md.find("### Workload lstm (perplexity)"), std::string::npos) << md;
  EXPECT_NE(md.find("| topk | 720 | 38 | 31.000 | 1.18 |"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir_ / "fig-accuracy-time-lstm.png"));
  EXPECT_EQ(res.figures.size(), 13u);
}

TEST_F(Report, PartialMatrixIsReportedAndStillDrawn) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
  write_tiny_matrix(dir_);
  // Drop exdyna-paper at 4 workers and dense at 2 (as an interrupted matrix leaves it).
  std::istringstream in(read_file(dir_ / "cells.csv"));
  std::string kept, line;
  while (std::getline(in, line))
    if (line.rfind("exdyna,exdyna-paper,4,", 0) != 0 && line.rfind("dense,dense,2,", 0) != 0)
      kept += line + "\n";
  testing::write(dir_ / "cells.csv", kept);
  const auto res = write_report(dir_, {});
  const auto md = read_file(dir_ / "report.md");
  EXPECT_NE(md.find("**the matrix is partial**, 2 cells missing"), std::string::npos) << md;
  EXPECT_NE(md.find("exdyna-paper at 4 workers, 1 Gbit/s, d = 0.01"), std::string::npos);
  EXPECT_NE(md.find("| 2 | 1 Gbit/s | 0.01 | 1000000 | **topk** | 20.000 | exdyna-exact (1.20x) | "
                    "not run |"),
            std::string::npos)
      << md;
  EXPECT_EQ(res.figures.size(), 9u);
  for (const auto& f : res.figures) EXPECT_GT(fs::file_size(f), 1000u) << f;
}

TEST_F(Report, WithoutGnuplotTheReportIsWrittenAndSaysWhy) {
  write_tiny_matrix(dir_);
  ReportOptions o;
  o.gnuplot = "/nonexistent/gnuplot";
  const auto res = write_report(dir_, o);
  EXPECT_TRUE(res.figures.empty());
  const auto md = read_file(dir_ / "report.md");
  EXPECT_NE(md.find("*Not drawn: gnuplot did not draw fig-select.png"), std::string::npos) << md;
  EXPECT_NE(md.find("**exdyna-exact**"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "fig-select.csv"));  // the data are there to plot elsewhere
  EXPECT_FALSE(fs::exists(dir_ / "fig-select.png"));
}

TEST_F(Report, MalformedCellsCsvIsRefusedNamingTheFile) {
  write_tiny_matrix(dir_);
  testing::write(dir_ / "cells.csv", read_file(dir_ / "cells.csv") + "dense,dense,8\n");
  try {
    write_report(dir_, {});
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cells.csv line 10"), std::string::npos) << e.what();
  }
  fs::remove(dir_ / "cells.csv");
  EXPECT_THROW(write_report(dir_, {}), DataError);
}

TEST_F(Efficiency, CommandsSelectEachVariant) {
  EfficiencyOptions o;
  o.exdyna_binary = "/x/exdyna";
  auto joined = [&](const std::string& label, const EfficiencyOptions& opts) {
    std::string s;
    for (const auto& a : train_command(opts, label, "/out")) s += a + " ";
    return s;
  };
  EXPECT_NE(joined("exdyna-exact", o)
                .find("--sparsifier exdyna --controller exact --balance "
                      "exact --worker-cap auto"),
            std::string::npos);
  EXPECT_NE(joined("exdyna-paper", o).find("--controller paper --balance paper"),
            std::string::npos);
  EXPECT_NE(joined("topk", o).find("--sparsifier topk --workers 2"), std::string::npos);
  EXPECT_NE(joined("topk", o).find("--no-plots --no-progress"), std::string::npos);
  EXPECT_NE(joined("topk", o).find("--epochs 4 "), std::string::npos);  // the CNN's default
  o.workload = "lstm";
  EXPECT_NE(joined("dense", o).find("--model lstm --dataset text"), std::string::npos);
  EXPECT_NE(joined("dense", o).find("--epochs 3 "), std::string::npos);  // the LSTM's default
  o.epochs = 5;
  EXPECT_NE(joined("dense", o).find("--epochs 5 "), std::string::npos);
  o.workload = "resnet";
  EXPECT_THROW(run_efficiency(o, "/nonexistent"), InvalidArgument);
}

TEST_F(Efficiency, EvalCsvBecomesEfficiencyRows) {
  testing::write(dir_ / "eval.csv",
                 "epoch,step,wall_s,train_loss,test_loss,test_accuracy,test_perplexity\n"
                 "1,50,3.9,1.7,1.1,0.607,nan\n2,100,5.2,0.73,0.71,0.771,nan\n");
  EXPECT_EQ(efficiency_rows("cnn", "topk", dir_ / "eval.csv"),
            "cnn,topk,50,1,test_accuracy,0.607\ncnn,topk,100,2,test_accuracy,0.771\n");
  testing::write(dir_ / "eval.csv",
                 "epoch,step,wall_s,train_loss,test_loss,test_accuracy,test_perplexity\n"
                 "1,40,3.9,5.1,5.0,nan,148.4\n");
  EXPECT_EQ(efficiency_rows("lstm", "dense", dir_ / "eval.csv"),
            "lstm,dense,40,1,perplexity,148.4\n");
}

// Real runs of the tool: one label, a tiny subset, two epochs (a few seconds).
TEST_F(Efficiency, RealTrainingRunsWriteEfficiencyCsv) {
  if (exdyna_tool().empty()) GTEST_SKIP() << "the exdyna tool is not built (or set EXDYNA_TOOL)";
  EfficiencyOptions o;
  o.exdyna_binary = exdyna_tool();
  o.labels = {"exdyna-exact"};
  o.train_limit = 256;
  o.test_limit = 200;
  o.epochs = 2;
  std::vector<std::string> progress;
  const auto res = run_efficiency(o, dir_, [&](const std::string& l) { progress.push_back(l); });
  if (!res.failed.empty() && res.failed[0].find("dataset") != std::string::npos)
    GTEST_SKIP() << "no Fashion-MNIST here: " << res.failed[0];
  ASSERT_TRUE(res.failed.empty()) << res.failed[0];
  const auto t = CsvTable::read(dir_ / "efficiency.csv",
                                {"workload", "label", "step", "epoch", "metric", "value"});
  ASSERT_EQ(t.rows(), 2u);
  EXPECT_EQ(t.text(0, "label"), "exdyna-exact");
  EXPECT_EQ(t.text(1, "metric"), "test_accuracy");
  EXPECT_GT(t.num(1, "value"), 0.1);  // better than chance after two epochs
  EXPECT_EQ(progress.size(), 1u);
  const auto cmd = read_file(dir_ / "train" / "cnn-exdyna-exact" / "command.txt");
  EXPECT_NE(cmd.find(" train --sparsifier exdyna --controller exact"), std::string::npos) << cmd;
}

// A debugging entry point, disabled by default: the default training-efficiency part (seven
// labels, the CNN) into $EXDYNA_EVAL_OUT, then the report there when cells.csv exists. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*DefaultEfficiency*'.
TEST_F(Efficiency, DISABLED_DefaultEfficiencyIntoOutDir) {
  const char* out = std::getenv("EXDYNA_EVAL_OUT");
  ASSERT_TRUE(out) << "set EXDYNA_EVAL_OUT";
  EfficiencyOptions o;
  o.exdyna_binary = exdyna_tool();
  if (const char* w = std::getenv("EXDYNA_EVAL_WORKLOAD")) o.workload = w;
  const auto res =
      run_efficiency(o, out, [](const std::string& l) { std::printf("%s\n", l.c_str()); });
  std::printf("training part: %.1f s\n", res.wall_s);
  for (const auto& f : res.failed) ADD_FAILURE() << f;
  if (fs::exists(fs::path(out) / "cells.csv")) write_report(out, {});
}

// The report alone on $EXDYNA_EVAL_OUT (a debugging entry point, disabled by default).
TEST_F(Report, DISABLED_ReportOnOutDir) {
  const char* out = std::getenv("EXDYNA_EVAL_OUT");
  ASSERT_TRUE(out) << "set EXDYNA_EVAL_OUT";
  const auto res = write_report(out, {});
  for (const auto& n : res.notes) std::printf("note: %s\n", n.c_str());
  EXPECT_FALSE(res.figures.empty());
}
}  // namespace
}  // namespace exdyna::eval
