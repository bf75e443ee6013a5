// The training loop of one worker (trainer.hpp). Its parts live beside it: the flat model
// (flat_model), batches (batches), evaluation (evaluation), checkpoint capture and restore
// (train_checkpoint), the configuration fingerprint (train_fingerprint), the progress lines and
// output files (train_report), the options and data (train_options).
#include "exdyna/train/trainer.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "exdyna/core/error.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/dgc.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/train/batches.hpp"
#include "exdyna/train/dgc_momentum.hpp"
#include "exdyna/train/evaluation.hpp"
#include "exdyna/train/flat_model.hpp"
#include "exdyna/train/train_checkpoint.hpp"
#include "exdyna/train/train_fingerprint.hpp"
#include "exdyna/train/train_report.hpp"

namespace exdyna::train {

void set_torch_threads(int n) {
  torch::set_num_threads(n);
}

namespace {

ModelSpec model_spec(const TrainOptions& opts, const DataBundle& data) {
  ModelSpec spec;
  spec.name = opts.model;
  if (data.text) {
    spec.vocab = data.text->vocab_size();
    spec.embed = opts.lm_embed;
    spec.hidden = opts.lm_hidden;
    spec.layers = opts.lm_layers;
  } else {
    spec.channels = data.train_images->channels;
    spec.height = data.train_images->height;
    spec.width = data.train_images->width;
    spec.num_classes = data.train_images->num_classes;
    spec.width_mult = opts.model_width;
  }
  return spec;
}

sparsifiers::ErrorFeedback make_error_feedback(const TrainOptions& opts, std::int64_t n,
                                               const comm::Communicator& comm) {
  return sparsifiers::make_error_feedback(opts.sparsifier, opts.sparse, n, comm.size(), comm.rank(),
                                          sparsifiers::builtin_registry());
}

// What one worker holds for the run: its model, error feedback around the sparsifier, the
// optimizer and schedule, its batches, and the run's length in steps.
struct Worker {
  Worker(const TrainOptions& o, comm::Communicator& c, const DataBundle& d)
      : opts(o),
        comm(c),
        m(model_spec(o, d), o.seed),
        ef(make_error_feedback(o, m.n, c)),
        sgd(m.n, o.sgd),
        sched(o.schedule),
        batches(o, d, c.size(), c.rank()) {
    sched.base_lr = o.sgd.lr;
    spe = batches.steps_per_epoch();
    total = o.epochs * spe;
    if (o.max_steps > 0) total = std::min(total, o.max_steps);
    if (o.sparsifier == "dgc") dgc = &dynamic_cast<sparsifiers::Dgc&>(ef.sparsifier());
  }
  WorkerState state() { return {m, sgd, ef}; }

  const TrainOptions& opts;
  comm::Communicator& comm;
  FlatModel m;
  sparsifiers::ErrorFeedback ef;
  Sgd sgd;
  LrSchedule sched;
  BatchSource batches;
  std::int64_t spe = 0, total = 0;  // steps per epoch, steps of the whole run
  sparsifiers::Dgc* dgc = nullptr;  // --sparsifier dgc: its density is set every step (warm-up)
};

// One step (paper Alg. 1) from global step `step`: forward/backward of this worker's batch into
// the flat gradient buffer, error feedback (collective), clipping, SGD. Returns its record.
IterRecord train_step(Worker& w, std::int64_t step, bool first, const GradientHook& on_gradient) {
  core::Stopwatch sw;
  torch::Tensor y;
  const auto x = w.batches.batch(step, y);
  w.m.flat_g.zero_();
  torch::nn::functional::CrossEntropyFuncOptions ce;
  auto loss = torch::nn::functional::cross_entropy(w.m.net->forward(x), y, ce);
  loss.backward();
  if (first) w.m.check_grad_views();
  double lsum = loss.item<double>();
  IterRecord rec;
  rec.t_compute = sw.lap();
  if (on_gradient) on_gradient(step, std::span<const float>(w.m.g_span()));
  w.comm.allreduce_sum(std::span<double>(&lsum, 1));
  rec.loss = lsum / w.comm.size();
  const bool dgc = w.dgc != nullptr;  // DGC's momentum correction (dgc_momentum.hpp)
  // This step's density: the target, or DGC's warm-up density of this step's epoch.
  double density = w.opts.sparse.density;
  if (dgc) {
    density = dgc_warmup_density(step / w.spe, w.opts.dgc_warmup_epochs, w.opts.dgc_warmup_start,
                                 density);
    w.dgc->set_density(density);
    dgc_velocity(w.m.g_span(), w.sgd.mutable_momentum_buffer(), w.m.p_span(),
                 static_cast<float>(w.opts.sgd.momentum),
                 static_cast<float>(w.opts.sgd.weight_decay), w.opts.clip_norm, w.comm.size());
  }
  rec.stats = w.ef.step(w.m.g_span(), w.comm);
  rec.stats.target_density = density;
  rec.stats.k_target = static_cast<std::int64_t>(std::floor(density * static_cast<double>(w.m.n)));
  sw.lap();
  rec.lr = w.sched.at(step, w.spe);
  if (dgc) {
    dgc_mask(w.sgd.mutable_momentum_buffer(), w.ef.last_result().indices);
    dgc_apply(w.m.p_span(), w.m.g_span(), rec.lr);
  } else {
    if (w.opts.clip_norm > 0) clip_grad_norm(w.m.g_span(), w.opts.clip_norm);
    w.sgd.step(w.m.p_span(), w.m.g_span(), rec.lr);
  }
  rec.t_optimizer = sw.lap();
  rec.step = step + 1;
  rec.epoch = static_cast<double>(step + 1) / static_cast<double>(w.spe);
  return rec;
}

// The end-of-run numbers of res: the last evaluation, loss means, times, throughput, parameters.
void finish_result(TrainResult& res, Worker& w, const EvalOut& last_eval,
                   const std::vector<double>& losses, std::int64_t step, std::int64_t start_step,
                   double elapsed_before, double run_s) {
  res.steps = step;
  res.test_accuracy = last_eval.accuracy;
  res.test_loss = last_eval.loss;
  res.test_perplexity = last_eval.perplexity;
  const auto nl = losses.size();
  const std::size_t w10 = std::min<std::size_t>(10, nl);
  for (std::size_t i = 0; i < w10; ++i) {
    res.first_train_loss += losses[i] / static_cast<double>(w10);
    res.last_train_loss += losses[nl - 1 - i] / static_cast<double>(w10);
  }
  res.elapsed_s = elapsed_before + run_s;
  res.samples_per_s = static_cast<double>((step - start_step) * w.opts.batch_size * w.comm.size()) /
                      std::max(run_s, 1e-9);
  res.mean_density = res.log.mean_density();
  res.mean_f_t = res.log.mean_f_t();
  auto p = w.m.p_span();
  res.params.assign(p.begin(), p.end());
}

}  // namespace

TrainResult train_worker(const TrainOptions& opts, comm::Communicator& comm,
                         const DataBundle* data_in, const StepHook& hook,
                         const GradientHook& on_gradient) {
  opts.validate();
  const int world = comm.size(), rank = comm.rank();
  DataBundle own;
  if (!data_in) {
    own = load_data(opts);
    data_in = &own;
  }
  const DataBundle& data = *data_in;
  const bool lm = data.text != nullptr;
  EXDYNA_CHECK_ARG(lm == (opts.model == "lstm"),
                   lm ? "--dataset text/wikitext2 needs --model lstm"
                      : "--model lstm needs --dataset text or wikitext2");
  Worker w(opts, comm, data);
  const std::string fingerprint = checkpoint_fingerprint(opts, w.m.n);
  ResumePoint at;
  if (!opts.resume.empty())
    at = restore_worker_checkpoint(opts.resume, fingerprint, w.state(), comm);
  const std::string ckpt_dir = checkpoint_dir(opts);

  TrainResult res;
  res.n_g = w.m.n;
  const bool writer = rank == 0 && !opts.out_dir.empty();
  Progress progress(w.total, opts.progress && rank == 0);
  if (rank == 0 && opts.progress)
    progress.message(start_line(opts, data, world, comm.engine(), w.m.n, w.total - at.step, w.spe));
  core::Stopwatch clock;
  const auto wall_s = [&] { return at.elapsed_s + clock.elapsed(); };
  std::int64_t step = at.step;
  double epoch_loss = 0;
  std::int64_t epoch_steps = 0;
  EvalOut last_eval;
  std::vector<double> losses;
  while (step < w.total) {
    IterRecord rec = train_step(w, step, step == at.step, on_gradient);
    ++step;
    rec.wall_s = wall_s();
    losses.push_back(rec.loss);
    epoch_loss += rec.loss;
    ++epoch_steps;
    if (hook) hook(rank, step, w.m.p_span());
    if (rank == 0) {
      const double run_s = clock.elapsed();
      progress.update(
          step, run_s, rec.loss, rec.stats.density,
          static_cast<double>((step - at.step) * opts.batch_size * world) / std::max(run_s, 1e-9));
      res.log.add(std::move(rec));
    }
    if (opts.checkpoint_every > 0 && step % opts.checkpoint_every == 0 && step < w.total)
      save_worker_checkpoint(ckpt_dir, step, wall_s(), fingerprint, w.state(), comm);
    if (step % w.spe == 0 || step == w.total) {
      w.m.average_buffers(comm);
      last_eval = evaluate(w.m, data, opts, comm);
      if (rank == 0) {
        EvalRecord e;
        e.epoch = (step + w.spe - 1) / w.spe;
        e.step = step;
        e.wall_s = wall_s();
        e.train_loss = epoch_steps ? epoch_loss / static_cast<double>(epoch_steps) : std::nan("");
        e.test_loss = last_eval.loss;
        e.test_accuracy = last_eval.accuracy;
        e.test_perplexity = last_eval.perplexity;
        res.log.add(e);
        progress.message(eval_line(e, lm, res.log.mean_density(), wall_s()));
        if (writer) write_logs(opts.out_dir, res.log);
      }
      epoch_loss = 0;
      epoch_steps = 0;
    }
  }
  progress.finish();
  finish_result(res, w, last_eval, losses, step, at.step, at.elapsed_s, clock.elapsed());
  res.algorithm_switch = comm.algorithm_switch();
  if (writer) write_run_files(opts, world, comm.engine(), w.spe, res);
  return res;
}

}  // namespace exdyna::train
