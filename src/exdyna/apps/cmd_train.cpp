// `exdyna train`: data-parallel training of a libtorch model with any sparsifier on any engine.
// With no arguments: the small CNN on Fashion-MNIST, 4 local workers (Gloo over 127.0.0.1 via the
// launcher), ExDyna at d = 0.01 — the project's main job. Torch-free TU: the trainer's interface
// hides libtorch.
#include <iostream>
#include <mutex>

#include "exdyna/apps/cli_checks.hpp"
#include "exdyna/apps/commands.hpp"
#include "exdyna/apps/engine_cli.hpp"
#include "exdyna/apps/sparsifier_cli.hpp"
#include "exdyna/comm/engines/factory.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sim/trace_recorder.hpp"
#include "exdyna/train/train_fingerprint.hpp"
#include "exdyna/train/trainer.hpp"

namespace exdyna::apps {

namespace {

// Everything `exdyna train` parses: the trainer's options plus what the command itself handles.
struct TrainCli {
  train::TrainOptions o;
  EngineCli eng;
  SparsifierCli sparsifier;
  std::vector<double> decay;
  int threads = 1;
  std::string record_trace;
  std::int64_t record_steps = sim::TraceRecorder::kDefaultSteps;
};

// The defaults of the project's main job.
void set_train_defaults(TrainCli& st) {
  auto& o = st.o;
  o.epochs = 4;
  o.batch_size = 32;
  o.sgd.lr = 0.05;
  o.sgd.momentum = 0.9;
  o.sgd.weight_decay = 0;
  // Step decay for the last epoch: +1 point of test accuracy for the default job.
  st.decay = {3};
  o.out_dir = "exdyna-train-out";
  st.eng.workers = 4;
  st.sparsifier.sparsifier = o.sparsifier;
  st.sparsifier.config = o.sparse;
}

// --model ... --batch-size, then the language models' sizes.
void add_model_options(CLI::App* sub, train::TrainOptions& o) {
  sub->add_option("--model", o.model, "model: tiny, cnn, resnet18, resnet152, inception-v4, lstm")
      ->capture_default_str();
  sub->add_option("--model-width", o.model_width,
                  "inception-v4: channel-width multiplier (1 = the paper's widths)")
      ->capture_default_str();
  sub->add_option("--dataset", o.dataset,
                  "fashion-mnist, mnist, cifar10, cifar100, synthetic, text (embedded English "
                  "corpus), wikitext2")
      ->capture_default_str();
  sub->add_option("--data-dir", o.data_dir,
                  "directory holding the dataset's files (default: the Debian package's)");
  sub->add_option("--epochs", o.epochs, "epochs")->capture_default_str();
  sub->add_option("--max-steps", o.max_steps, "stop after this many steps in all (0: no limit)");
  sub->add_option("--batch-size", o.batch_size, "batch size per worker")->capture_default_str();
  sub->add_option("--bptt", o.bptt, "language models: tokens per sequence")->capture_default_str();
  sub->add_option("--embed", o.lm_embed, "language models: embedding size")->capture_default_str();
  sub->add_option("--hidden", o.lm_hidden, "language models: LSTM hidden size")
      ->capture_default_str();
  sub->add_option("--lstm-layers,--layers", o.lm_layers, "language models: LSTM layers")
      ->capture_default_str();
}

// The optimizer, its schedule, the seed and the data limits.
void add_optimizer_options(CLI::App* sub, TrainCli& st) {
  auto& o = st.o;
  sub->add_option("--lr", o.sgd.lr, "learning rate")->capture_default_str();
  sub->add_option("--momentum", o.sgd.momentum, "SGD momentum")->capture_default_str();
  sub->add_flag("--nesterov", o.sgd.nesterov, "Nesterov momentum");
  sub->add_option("--weight-decay", o.sgd.weight_decay, "L2 weight decay")->capture_default_str();
  sub->add_option("--warmup", o.schedule.warmup_epochs, "linear learning-rate warm-up, in epochs")
      ->capture_default_str();
  sub->add_option(
      "--lr-decay", st.decay,
      "epochs at which the learning rate is multiplied by --lr-decay-factor (default: 3)");
  sub->add_option("--lr-decay-factor", o.schedule.decay_factor, "step-decay factor")
      ->capture_default_str();
  sub->add_option("--clip", o.clip_norm, "clip the averaged update to this L2 norm (0: off)")
      ->capture_default_str();
  sub->add_option("--dgc-warmup-epochs", o.dgc_warmup_epochs,
                  "DGC: density warm-up over the first E epochs, exponentially from "
                  "--dgc-warmup-start down to --density, one density per epoch (0: off)")
      ->check(int_at_least(0))
      ->capture_default_str();
  sub->add_option("--dgc-warmup-start", o.dgc_warmup_start,
                  "DGC: the warm-up's first density, in (--density, 1]")
      ->capture_default_str();
  sub->add_option("--seed", o.seed, "seed of initial weights, shuffling and augmentation")
      ->capture_default_str();
  sub->add_option("--train-limit", o.train_limit, "use only the first N training samples (0: all)");
  sub->add_option("--test-limit", o.test_limit, "use only the first N test samples (0: all)");
}

// Outputs, checkpoints, threads and the gradient trace.
void add_output_options(CLI::App* sub, TrainCli& st) {
  auto& o = st.o;
  sub->add_option("--out", o.out_dir, "output directory (CSV, summary JSON, plots, checkpoints)")
      ->capture_default_str();
  sub->add_option("--checkpoint-every", o.checkpoint_every,
                  "write a checkpoint every N steps (0: never)");
  sub->add_option("--resume", o.resume,
                  "continue from a checkpoint (its directory, or the --out of a run)");
  sub->add_option("--threads", st.threads, "libtorch intra-op threads per worker")
      ->capture_default_str();
  sub->add_option("--record-trace", st.record_trace,
                  "write every worker's raw local gradient (after backward, before error feedback) "
                  "of the first --record-steps steps to a new trace directory DIR, for exdyna "
                  "simulate --trace DIR");
  sub->add_option("--record-steps", st.record_steps,
                  "steps --record-trace records (0: every step of the run)")
      ->capture_default_str();
  sub->add_flag("!--no-progress", o.progress, "no progress line");
  sub->add_flag("!--no-plots", o.plots, "no gnuplot plots");
}

// f(), the trace recorder's refusals wrapped in the option's name.
template <typename F>
auto recording(F&& f) {
  try {
    return f();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("--record-trace: ", e.what()));
  }
}

// One worker: checks that every rank runs the same job, trains, prints the summary on rank 0 and
// finishes the trace when one is recorded.
void train_rank(const TrainCli& st, comm::Communicator& c, const train::DataBundle* data) {
  const auto& o = st.o;
  auto fp = base_fingerprint(c);
  const auto train_fp = train::train_fingerprint(o);
  for (const auto& [name, value] : train_fp.fields()) fp.add(name, value);
  fp.add("epochs", std::to_string(o.epochs)).add("lr", std::to_string(o.sgd.lr));
  fp.add("record_trace", st.record_trace).add("record_steps", std::to_string(st.record_steps));
  comm::check_same_configuration(c, fp);
  c.set_timeout(st.eng.timeout());
  std::unique_ptr<sim::TraceRecorder> recorder;
  train::GradientHook on_gradient;
  if (!st.record_trace.empty()) {
    recorder = recording(
        [&] { return std::make_unique<sim::TraceRecorder>(st.record_trace, st.record_steps, c); });
    on_gradient = [&](std::int64_t, std::span<const float> g) { recorder->record(g); };
  }
  const auto r = train::train_worker(o, c, data, {}, on_gradient);
  if (c.rank() == 0) std::cout << train::summary_table(o, c.size(), r) << std::flush;
  if (recorder) {
    // Whole iterations of every rank: a run shorter than --record-steps gives a shorter trace.
    const auto m = recorder->finish();
    if (c.rank() == 0)
      std::cout << "  trace: " << st.record_trace << " (" << m.iterations << " iterations x "
                << m.workers << " workers x n_g = " << m.n_g << ", "
                << m.iterations * m.workers * m.n_g * 4 << " bytes)\n"
                << std::flush;
  }
}

// The action: validates what was parsed, then trains on the chosen engine.
int run_train(TrainCli& st) {
  auto& o = st.o;
  apply(st.sparsifier, o.sparsifier, o.sparse);
  o.schedule.decay_epochs = st.decay;
  o.validate();
  EXDYNA_CHECK_ARG(st.threads > 0, "--threads ", st.threads, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(st.record_steps >= 0, "--record-steps ", st.record_steps,
                   " is not valid; expected >= 0 (0: every step)");
  // Refuse a used directory before any worker starts. Not in a launched worker: its rank 0
  // creates the directory meanwhile (the recorder checks again there, on rank 0 only).
  const bool launched = comm::in_launched_environment();
  if (!st.record_trace.empty() && !launched)
    recording([&] { sim::prepare_trace_dir(st.record_trace); });
  train::set_torch_threads(st.threads);
  // In process, the worker threads share one read-only copy of the data.
  std::mutex mu;
  std::shared_ptr<train::DataBundle> data;
  return run_on_engine(st.eng, [&](comm::Communicator& c) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!data) data = std::make_shared<train::DataBundle>(train::load_data(o));
    }
    train_rank(st, c, data.get());
  });
}

}  // namespace

void add_train_command(CLI::App& app, Action& action) {
  auto* sub =
      app.add_subcommand("train",
                         "train a model data-parallel with gradient sparsification "
                         "(default: small CNN on Fashion-MNIST, 4 workers, ExDyna at d = 0.01)");
  auto st = std::make_shared<TrainCli>();
  set_train_defaults(*st);
  add_sparsifier_options(sub, st->sparsifier);
  add_model_options(sub, st->o);
  add_optimizer_options(sub, *st);
  add_output_options(sub, *st);
  add_engine_options(sub, st->eng, true, "auto");
  sub->callback([st, &action] { action = [st] { return run_train(*st); }; });
}

}  // namespace exdyna::apps
