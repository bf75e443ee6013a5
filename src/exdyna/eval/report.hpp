// The comparison's report: report.md with the summary computed from cells.csv, the method, the
// figures (PNG via gnuplot, each with the CSV behind it and the gnuplot script that draws it), the
// scale model's fit and its error against the measurements, and the statistical efficiency (time
// to accuracy) where efficiency.csv exists. A partial matrix and a missing efficiency.csv are
// reported, not fatal; a malformed cells.csv or comm.csv throws DataError naming file and line.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace exdyna::eval {

struct ReportOptions {
  // The command line that produced the run (shown in the report).
  std::string command_line;
  // The command that regenerates report and figures from the files (each caption names it).
  std::string regenerate_command;  // default: "exdyna compare --report-only --out <out_dir>"
  std::string gnuplot = "gnuplot";
  // Time to accuracy: the test accuracy to reach (0: 95 % of the dense run's best accuracy); for
  // perplexity, 0 means 105 % of the dense run's best (lowest) perplexity. Short runs are noisy:
  // closer to the best, a label's time depends on one evaluation more than on its speed.
  double target_accuracy = 0;
  double target_perplexity = 0;
  // The density of the training runs (EfficiencyOptions::density): time to accuracy uses the
  // iteration times of the cells at the measured density nearest to it.
  double train_density = 0.01;
};

struct ReportResult {
  std::filesystem::path report;                // DIR/report.md
  std::vector<std::filesystem::path> figures;  // PNGs drawn
  std::vector<std::string> notes;              // what is missing (for the command's output)
};

// Reads out_dir/cells.csv (required), comm.csv, cells/*/stats.csv, efficiency.csv; writes
// report.md, fig-*.png with fig-*.csv and fig-*.gp, model.csv and model_fit.csv.
ReportResult write_report(const std::filesystem::path& out_dir, const ReportOptions& opts);

}  // namespace exdyna::eval
