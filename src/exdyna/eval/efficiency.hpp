// Statistical efficiency for the comparison: short real `exdyna train` runs of each sparsifier
// label (the binary is run as a child process, one run at a time), their per-epoch test accuracy
// (or perplexity) collected into efficiency.csv: `workload,label,step,epoch,metric,value`.
// The report combines it with the emulated iteration time (time to accuracy).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace exdyna::eval {

struct EfficiencyOptions {
  std::filesystem::path exdyna_binary;  // the `exdyna` tool
  // Labels as in cells.csv; exdyna-exact = the exact controller, balance and worker cap auto,
  // exdyna-paper = the paper's Alg. 3 and Alg. 5.
  std::vector<std::string> labels = {"dense", "topk",         "cltk",        "hard-threshold",
                                     "sidco", "exdyna-paper", "exdyna-exact"};
  // cnn: the main job's CNN on Fashion-MNIST (test accuracy); lstm: the LSTM on the embedded text
  // corpus (perplexity).
  std::string workload = "cnn";
  int workers = 2;
  double density = 0.01;
  // Defaults measured to keep the CNN's eight runs near 2 minutes on 2 cores (about 15 s each):
  // 3200 training samples, 4 epochs of 50 steps at batch 32 per worker (where all but one label
  // reach 95 % of dense's best accuracy), evaluated on 1000 test samples. epochs = 0: the
  // workload's default, 4 for cnn, 3 for lstm
  // (19 steps per epoch on the embedded corpus, ~70 s per label here, ~8 minutes for seven).
  int epochs = 0;
  std::int64_t train_limit = 3200, test_limit = 1000, max_steps = 0;
  int batch_size = 32;
  std::string data_dir;                 // empty: the tool's default
  std::vector<std::string> extra_args;  // appended to every run
};

struct EfficiencyResult {
  std::filesystem::path csv;        // DIR/efficiency.csv
  std::vector<std::string> failed;  // "label: why" for runs that did not finish
  double wall_s = 0;
};

// Progress lines ("train cnn topk (2/7) ...").
using EfficiencyProgress = std::function<void(const std::string&)>;

// The epochs a run makes: opts.epochs, or the workload's default when 0.
int epochs_of(const EfficiencyOptions& opts);

// The command line of one label's run, writing into run_dir.
std::vector<std::string> train_command(const EfficiencyOptions& opts, const std::string& label,
                                       const std::filesystem::path& run_dir);

// eval.csv of a run (epoch,step,wall_s,train_loss,test_loss,test_accuracy,test_perplexity) as
// efficiency.csv rows of (workload, label), without the header. Throws DataError when malformed.
std::string efficiency_rows(const std::string& workload, const std::string& label,
                            const std::filesystem::path& eval_csv);

// Runs every label (each in out_dir/train/<workload>-<label>, its command line in command.txt and
// its output in train.log there) and
// writes out_dir/efficiency.csv: this workload's rows replace any earlier ones, other workloads'
// rows are kept. A run that fails is listed in the result, not thrown; bad options throw
// InvalidArgument.
EfficiencyResult run_efficiency(const EfficiencyOptions& opts, const std::filesystem::path& out_dir,
                                const EfficiencyProgress& progress = {});

}  // namespace exdyna::eval
