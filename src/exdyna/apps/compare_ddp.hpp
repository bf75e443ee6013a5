// `exdyna compare --ddp`: the DDP head-to-head (eval/ddp_matrix.hpp) and its report
// (examples/ddp_hooks_report.py, which reads only the runs' CSVs and status files).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace exdyna::apps {

struct CompareDdpArgs {
  bool ddp = false;
  std::vector<std::string> models;  // empty: cnn, lstm (cnn with --quick)
  std::string device = "cpu";       // the script's --device: cpu or cuda
  std::vector<std::string> hooks;   // empty: eval::default_ddp_hooks()
  std::string
      python;  // empty: the first interpreter that imports torch and exdyna (compare_ddp.cpp)
  std::string script;         // empty: examples/ddp_hooks.py of the source tree
  std::string report_script;  // empty: examples/ddp_hooks_report.py of the source tree
  int steps = 0;              // 0: cnn 200, lstm 100, 12 with --quick
  double budget_s = -1;       // training seconds per run; < 0: 45 (0: none)
  int eval_every = 0;         // 0: 10, 4 with --quick
  int seeds = 1;              // runs per setting, --seed 0 .. seeds - 1
  int ranks_per_host = 1;     // torchrun's --nproc_per_node; HSDP's shard group (hooks hsdp*)
  std::vector<std::string> script_args;
};

// What `compare --ddp` shares with `compare`.
struct CompareCommon {
  std::string out;
  std::vector<std::string> workers, bandwidth;
  std::string delay;
  bool quick = false, report_only = false;
  double timeout_s = 0;
  std::string gnuplot;
  std::string command_line;
};

void add_compare_ddp_options(CLI::App* sub, CompareDdpArgs& d);
// Runs the head-to-head and its report. Exit status 0 when the report was written (a failed run
// is a row of it), 1 when the report failed, 2 on bad input or without network namespaces.
int run_compare_ddp(const CompareDdpArgs& d, const CompareCommon& c);

}  // namespace exdyna::apps
