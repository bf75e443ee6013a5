// What a training run records and writes: per-iteration rows (loss, learning rate, every StepStats
// field, phase times), per-epoch evaluations, the per-iteration CSV and a progress line (plots.hpp
// draws the plots from the CSVs). Torch-free. Every file is written atomically (temp + rename).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::train {

// Creates path's directory if missing, then core::write_file_atomic (temporary beside path,
// fsync, rename), so readers never see a half-written file.
void atomic_write(const std::string& path, std::string_view content);

// A double as the CSVs print it: 9 significant digits, "nan" for NaN.
std::string format_number(double v);

struct IterRecord {
  std::int64_t step = 0;
  double epoch = 0;  // fractional
  double wall_s = 0;
  double loss = 0;  // mean over workers
  double lr = 0;
  double t_compute = 0;    // forward + backward
  double t_optimizer = 0;  // SGD step
  sparsifiers::StepStats stats;
};

struct EvalRecord {
  std::int64_t epoch = 0;
  std::int64_t step = 0;
  double wall_s = 0;
  double train_loss = 0;  // mean over the epoch's steps
  double test_loss = 0;
  double test_accuracy = 0;    // in [0, 1]; NaN for language models
  double test_perplexity = 0;  // exp(test_loss) for language models, else NaN
};

class RunLog {
 public:
  void add(IterRecord r) { iters_.push_back(std::move(r)); }
  void add(EvalRecord r) { evals_.push_back(r); }
  const std::vector<IterRecord>& iters() const { return iters_; }
  const std::vector<EvalRecord>& evals() const { return evals_; }
  // step, epoch, wall_s, loss, lr, t_compute, t_optimizer, then the columns of
  // sparsifiers::step_stat_columns (one per worker of the first iteration for per-worker fields).
  std::string iteration_csv() const;
  std::string eval_csv() const;
  // Means over the recorded iterations (skipping the first `skip`).
  double mean_density(std::size_t skip = 0) const;
  double mean_f_t(std::size_t skip = 0) const;

 private:
  std::vector<IterRecord> iters_;
  std::vector<EvalRecord> evals_;
};

// A one-line progress display on stderr: a bar with ETA, loss, density and throughput when stderr
// is a terminal; when it is not, a plain line every `plain_every` fraction of the run.
class Progress {
 public:
  explicit Progress(std::int64_t total_steps, bool enabled);
  void update(std::int64_t step, double elapsed_s, double loss, double density,
              double samples_per_s);
  void message(const std::string& line);  // a line that does not disturb the bar
  void finish();

 private:
  std::int64_t total_;
  bool enabled_, tty_;
  double last_draw_ = -1;
  std::int64_t last_plain_ = -1;
  bool drawn_ = false;
};

}  // namespace exdyna::train
