// What a training run tells: the progress lines rank 0 prints, the files it writes into --out
// (iterations.csv, eval.csv, plots, summary.json) and the summary table of `exdyna train`
// (declared in trainer.hpp). Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "exdyna/train/metrics.hpp"
#include "exdyna/train/trainer.hpp"

namespace exdyna::train {

// The line that opens a run: model, data, workers, engine, sparsifier, n_g and the steps to do.
std::string start_line(const TrainOptions& opts, const DataBundle& data, int world,
                       std::string_view engine, std::int64_t n_g, std::int64_t steps_left,
                       std::int64_t steps_per_epoch);

// DGC's density warm-up epoch by epoch, "0.25 (epoch 1), 0.05 (epoch 2), then 0.01 from epoch 3"
// ("" without one): the start line and the summary show it.
std::string dgc_warmup_text(const TrainOptions& opts);

// The line after an evaluation (wall_s: training time so far, resumed time included).
std::string eval_line(const EvalRecord& e, bool lm, double mean_density, double wall_s);

// Writes iterations.csv and eval.csv into out_dir (atomically).
void write_logs(const std::string& out_dir, const RunLog& log);

// Rank 0, at the end of a run with --out: the logs, the plots (unless --no-plots) and
// summary.json; adds the files written to r.files and why plots are missing to r.plot_note.
void write_run_files(const TrainOptions& opts, int world, std::string_view engine,
                     std::int64_t steps_per_epoch, TrainResult& r);

}  // namespace exdyna::train
