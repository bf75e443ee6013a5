// The distributed trainer: one call per worker (a thread of the in-process group or a process
// of a real engine). Torch-free interface; the implementation (trainer.cpp, the loop, and the parts
// it names) uses libtorch.
//
// One step on every worker (paper Alg. 1):
//   1. forward/backward of this worker's batch; parameters' .grad are views into ONE flat
//      gradient buffer (set up once), so backward writes the flat buffer directly;
//   2. ErrorFeedback::step (any registered sparsifier, any Communicator) turns the flat buffer
//      into the averaged sparse update, identical on every rank;
//   3. optional global-norm clipping of that update, then SGD (momentum, Nesterov, weight decay)
//      over the flat parameter buffer (parameters are views into it too), learning rate from the
//      warm-up / step-decay schedule.
// Every random choice is a pure function of (seed, epoch, rank, step): runs are deterministic on
// CPU, and a checkpoint's step number is its whole RNG and data position.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/train/datasets.hpp"
#include "exdyna/train/metrics.hpp"
#include "exdyna/train/optimizer.hpp"
#include "exdyna/train/text.hpp"

namespace exdyna::train {

struct TrainOptions {
  std::string model = "cnn";  // see model_names()
  std::string dataset =
      "fashion-mnist";  // fashion-mnist | mnist | cifar10 | cifar100 | synthetic | text | wikitext2
  std::string data_dir;  // "" = the dataset's default location
  std::string sparsifier = "exdyna";
  sparsifiers::SparsifierConfig
      sparse;  // density, gather mode, ExDyna options (n_g, world, rank: filled in)
  // --sparsifier dgc: the paper's density warm-up (dgc_momentum.hpp): epoch e < E runs at
  // start * (density / start)^(e / E). E = 0: off (the default; why in dgc_momentum.hpp).
  std::int64_t dgc_warmup_epochs = 0;
  double dgc_warmup_start = 0.25;  // the paper's first density (75 % sparsity)
  std::int64_t epochs = 4;
  std::int64_t max_steps = 0;    // > 0: stop after this many steps in all (counting resumed ones)
  std::int64_t batch_size = 32;  // per worker
  std::int64_t bptt = 35;        // language models: tokens per sequence
  int lm_embed = 128, lm_hidden = 128, lm_layers = 2;  // language models: LSTM sizes
  double model_width = 1.0;  // inception-v4: channel-width multiplier (1 = the paper's widths)
  SgdOptions sgd;
  LrSchedule schedule;   // base_lr is taken from sgd.lr
  double clip_norm = 0;  // > 0: clip the averaged update to this L2 norm
  std::uint64_t seed = 1;
  std::int64_t train_limit = 0;  // > 0: use only the first N training samples (smoke runs, tests)
  std::int64_t test_limit = 0;
  std::string out_dir;                // "" = write no files (tests)
  std::int64_t checkpoint_every = 0;  // > 0: checkpoint every N steps into out_dir/checkpoints
  std::string checkpoint_dir;         // default out_dir/checkpoints
  std::string resume;                 // a checkpoint to continue from
  bool progress = true;               // rank 0 draws a progress line on stderr
  bool plots = true;
  void validate() const;
};

// Data loaded once and shared by the worker threads of an in-process run (read-only).
struct DataBundle {
  std::shared_ptr<const ImageDataset> train_images, test_images;
  std::shared_ptr<const TextCorpus> text;
};
// Loads what opts.dataset names (applying train_limit / test_limit).
DataBundle load_data(const TrainOptions& opts);

struct TrainResult {
  std::int64_t steps = 0;    // steps done in all
  double test_accuracy = 0;  // last evaluation, in [0, 1] (NaN for language models)
  double test_loss = 0;
  double test_perplexity = 0;                        // language models
  double first_train_loss = 0, last_train_loss = 0;  // mean of the first / last 10 steps
  double mean_density = 0;                           // over all iterations of this run
  double mean_f_t = 0;
  double elapsed_s = 0;  // wall time of training (including resumed time)
  double samples_per_s = 0;
  std::int64_t n_g = 0;
  std::vector<float> params;       // final parameters of this rank
  RunLog log;                      // filled on rank 0
  std::vector<std::string> files;  // written by rank 0
  std::string plot_note;           // why plots are missing, if they are
  // The Gloo engine's log-round switch this run used (measured at the start unless
  // EXDYNA_GLOO_LOG_BELOW set it): it picks the all-reduce's algorithm, and with it the order of
  // the float additions, so setting it to this value repeats the run bit for bit. Empty on the
  // engines without one.
  std::optional<comm::Communicator::AlgorithmSwitch> algorithm_switch;
};

// Called after every step with this rank's parameters (tests check ranks agree).
using StepHook = std::function<void(int rank, std::int64_t step, std::span<const float> params)>;

// Called on every rank in every step after backward and before error feedback, with the step
// number (0-based, counting resumed steps) and this rank's raw local minibatch gradient: the flat
// gradient buffer, read-only (`exdyna train --record-trace` writes it to a trace).
using GradientHook = std::function<void(std::int64_t step, std::span<const float> grad)>;

// Runs training on this worker. data may be null (then load_data is called here).
TrainResult train_worker(const TrainOptions& opts, comm::Communicator& comm,
                         const DataBundle* data = nullptr, const StepHook& hook = {},
                         const GradientHook& on_gradient = {});

// Intra-op threads of libtorch for this process (1 per worker is best when workers share cores).
void set_torch_threads(int n);

// The summary table printed at the end of `exdyna train`.
std::string summary_table(const TrainOptions& opts, int world, const TrainResult& r);

}  // namespace exdyna::train
