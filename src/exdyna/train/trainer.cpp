#include "exdyna/train/trainer.hpp"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exdyna/core/error.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/train/checkpoint.hpp"
#include "exdyna/train/models.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;

void TrainOptions::validate() const {
  EXDYNA_CHECK_ARG(epochs > 0, "--epochs ", epochs, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(max_steps >= 0, "--max-steps ", max_steps, " is not valid; expected >= 0");
  EXDYNA_CHECK_ARG(batch_size > 0, "--batch-size ", batch_size,
                   " is not valid; expected > 0 (per worker)");
  EXDYNA_CHECK_ARG(bptt > 1, "--bptt ", bptt, " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(lm_embed > 0 && lm_hidden > 0 && lm_layers > 0,
                   "--embed/--hidden/--layers must be > 0");
  EXDYNA_CHECK_ARG(model_width > 0 && model_width <= 4, "--model-width ", model_width,
                   " is not valid; expected in (0, 4]");
  EXDYNA_CHECK_ARG(clip_norm >= 0, "--clip ", clip_norm, " is not valid; expected >= 0 (0 = off)");
  EXDYNA_CHECK_ARG(checkpoint_every >= 0, "--checkpoint-every ", checkpoint_every,
                   " is not valid; expected >= 0");
  EXDYNA_CHECK_ARG(checkpoint_every == 0 || !out_dir.empty() || !checkpoint_dir.empty(),
                   "--checkpoint-every needs --out DIR");
  sgd.validate();
  auto s = schedule;
  s.base_lr = sgd.lr;
  s.validate();
}

void set_torch_threads(int n) {
  torch::set_num_threads(n);
}

namespace {

std::shared_ptr<ImageDataset> limited(ImageDataset d, std::int64_t limit) {
  if (limit > 0 && limit < d.size()) {
    d.labels.resize(static_cast<std::size_t>(limit));
    d.pixels.resize(static_cast<std::size_t>(limit * d.sample_bytes()));
  }
  return std::make_shared<ImageDataset>(std::move(d));
}

// Owns a worker's model with its parameters and gradients as views into two flat buffers.
struct FlatModel {
  std::shared_ptr<Net> net;
  torch::Tensor flat_p, flat_g;
  std::vector<torch::Tensor> params;
  std::vector<torch::Tensor> float_buffers;  // batch-norm running statistics
  std::int64_t n = 0;

  FlatModel(const ModelSpec& spec, std::uint64_t seed) {
    net = make_model(spec, seed);
    params = net->parameters();
    for (const auto& p : params) n += p.numel();
    flat_p = torch::empty({n}, torch::kFloat);
    flat_g = torch::zeros({n}, torch::kFloat);
    torch::NoGradGuard ng;
    std::int64_t off = 0;
    for (auto& p : params) {
      const auto k = p.numel();
      auto pv = flat_p.narrow(0, off, k).view(p.sizes());
      pv.copy_(p);
      p.set_data(pv);
      p.mutable_grad() = flat_g.narrow(0, off, k).view(p.sizes());
      off += k;
    }
    for (auto& b : net->buffers())
      if (b.scalar_type() == torch::kFloat) float_buffers.push_back(b);
  }
  std::span<float> p_span() { return {flat_p.data_ptr<float>(), static_cast<std::size_t>(n)}; }
  std::span<float> g_span() { return {flat_g.data_ptr<float>(), static_cast<std::size_t>(n)}; }
  // Backward must have accumulated into the views (autograd adds in place into a defined .grad);
  // if a future libtorch replaced them, the flat buffer would silently hold stale gradients.
  void check_grad_views() {
    std::int64_t off = 0;
    for (auto& p : params) {
      EXDYNA_CHECK(
          p.grad().defined() && p.grad().data_ptr<float>() == flat_g.data_ptr<float>() + off,
          "a parameter's gradient is no longer a view into the flat gradient buffer");
      off += p.numel();
    }
  }
  std::vector<float> get_buffers() const {
    std::vector<float> v;
    for (const auto& b : float_buffers) {
      auto c = b.contiguous();
      v.insert(v.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    return v;
  }
  void set_buffers(const std::vector<float>& v) {
    torch::NoGradGuard ng;
    std::size_t off = 0;
    for (auto& b : float_buffers) {
      EXDYNA_CHECK(off + static_cast<std::size_t>(b.numel()) <= v.size(), "buffer size mismatch");
      b.copy_(torch::from_blob(const_cast<float*>(v.data() + off), b.sizes(), torch::kFloat));
      off += static_cast<std::size_t>(b.numel());
    }
  }
};

// Builds a normalised (and, for training sets that ask for it, augmented) batch of images.
torch::Tensor image_batch(const ImageDataset& d, std::span<const std::int64_t> idx, bool train,
                          std::uint64_t seed, torch::Tensor& labels) {
  const auto b = static_cast<std::int64_t>(idx.size());
  const int C = d.channels, H = d.height, W = d.width;
  auto x = torch::empty({b, C, H, W}, torch::kFloat);
  labels = torch::empty({b}, torch::kLong);
  float* xp = x.data_ptr<float>();
  auto* lp = labels.data_ptr<std::int64_t>();
  SplitMix64 g(seed);
  for (std::int64_t s = 0; s < b; ++s) {
    const std::int64_t i = idx[static_cast<std::size_t>(s)];
    lp[s] = d.labels[static_cast<std::size_t>(i)];
    const std::uint8_t* px = d.pixels.data() + i * d.sample_bytes();
    int dx = 0, dy = 0;
    bool flip = false;
    if (train && d.augment) {  // 4-pixel zero-padded random crop and horizontal flip
      dx = static_cast<int>(g.below(9)) - 4;
      dy = static_cast<int>(g.below(9)) - 4;
      flip = g.below(2) != 0;
    }
    for (int c = 0; c < C; ++c) {
      const float m = d.mean[static_cast<std::size_t>(c)],
                  inv = 1.0f / d.stddev[static_cast<std::size_t>(c)];
      for (int y = 0; y < H; ++y)
        for (int xx = 0; xx < W; ++xx) {
          const int sy = y + dy, sx0 = xx + dx;
          const int sx = flip ? W - 1 - sx0 : sx0;
          float v = 0;
          if (sy >= 0 && sy < H && sx0 >= 0 && sx0 < W) v = px[(c * H + sy) * W + sx] / 255.0f;
          *xp++ = (v - m) * inv;
        }
    }
  }
  return x;
}

// A language-model worker's view of the training stream: its contiguous shard laid out as
// batch_size rows (the classic "batchify"), cut into bptt-long chunks visited in a per-epoch
// shuffled order.
struct LmShard {
  std::vector<std::int32_t> rows;  // [B][row_len]
  std::int64_t B = 0, row_len = 0, bptt = 0;
  std::int64_t chunks() const { return (row_len - 1) / bptt; }
};

LmShard lm_shard(const std::vector<std::int32_t>& tokens, int world, int rank, std::int64_t B,
                 std::int64_t bptt) {
  const auto part = static_cast<std::int64_t>(tokens.size()) / world;
  LmShard s;
  s.B = B;
  s.bptt = bptt;
  s.row_len = part / B;
  EXDYNA_CHECK_ARG(s.row_len > bptt, "text corpus too small: ", tokens.size(),
                   " training tokens over ", world, " workers x ", B, " rows leave rows of ",
                   s.row_len, " tokens; expected > --bptt ", bptt);
  s.rows.resize(static_cast<std::size_t>(B * s.row_len));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < s.row_len; ++t)
      s.rows[static_cast<std::size_t>(b * s.row_len + t)] =
          tokens[static_cast<std::size_t>(rank * part + b * s.row_len + t)];
  return s;
}

torch::Tensor lm_batch(const LmShard& s, std::int64_t chunk, torch::Tensor& target) {
  auto x = torch::empty({s.B, s.bptt}, torch::kLong);
  target = torch::empty({s.B * s.bptt}, torch::kLong);
  auto* xp = x.data_ptr<std::int64_t>();
  auto* tp = target.data_ptr<std::int64_t>();
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t t = 0; t < s.bptt; ++t) {
      const auto base = static_cast<std::size_t>(b * s.row_len + chunk * s.bptt + t);
      xp[b * s.bptt + t] = s.rows[base];
      tp[b * s.bptt + t] = s.rows[base + 1];
    }
  return x;
}

std::vector<std::int64_t> shuffled(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  SplitMix64 g(seed);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(v[static_cast<std::size_t>(i)], v[g.below(static_cast<std::uint64_t>(i + 1))]);
  return v;
}

struct EvalOut {
  double loss = 0, accuracy = std::nan(""), perplexity = std::nan("");
};

// Every rank evaluates its slice of the test split; sums are all-reduced in rank order, so every
// rank gets the same numbers.
EvalOut evaluate(FlatModel& m, const DataBundle& data, const TrainOptions& opts,
                 comm::Communicator& comm) {
  torch::NoGradGuard ng;
  m.net->eval();
  double acc[3] = {0, 0, 0};  // loss sum, correct, count
  const int w = comm.size(), r = comm.rank();
  if (data.text) {
    const auto& toks = data.text->test;
    const std::int64_t nchunks = (static_cast<std::int64_t>(toks.size()) - 1) / opts.bptt;
    std::vector<std::int64_t> mine;
    for (std::int64_t j = r; j < nchunks; j += w) mine.push_back(j);
    for (std::size_t s = 0; s < mine.size(); s += 64) {
      const auto nb = static_cast<std::int64_t>(std::min<std::size_t>(64, mine.size() - s));
      auto x = torch::empty({nb, opts.bptt}, torch::kLong);
      auto y = torch::empty({nb * opts.bptt}, torch::kLong);
      for (std::int64_t b = 0; b < nb; ++b)
        for (std::int64_t t = 0; t < opts.bptt; ++t) {
          const auto base =
              static_cast<std::size_t>(mine[s + static_cast<std::size_t>(b)] * opts.bptt + t);
          x.data_ptr<std::int64_t>()[b * opts.bptt + t] = toks[base];
          y.data_ptr<std::int64_t>()[b * opts.bptt + t] = toks[base + 1];
        }
      auto out = m.net->forward(x);
      acc[0] += torch::nn::functional::cross_entropy(
                    out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
      acc[2] += static_cast<double>(nb * opts.bptt);
    }
  } else {
    const auto& d = *data.test_images;
    const std::int64_t n = d.size();
    const std::int64_t lo = n * r / w, hi = n * (r + 1) / w;
    std::vector<std::int64_t> idx;
    for (std::int64_t s = lo; s < hi; s += 500) {
      idx.clear();
      for (std::int64_t i = s; i < std::min(hi, s + 500); ++i) idx.push_back(i);
      torch::Tensor y;
      auto x = image_batch(d, idx, false, 0, y);
      auto out = m.net->forward(x);
      acc[0] += torch::nn::functional::cross_entropy(
                    out, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
      acc[1] += out.argmax(1).eq(y).sum().item<double>();
      acc[2] += static_cast<double>(idx.size());
    }
  }
  comm.allreduce_sum(std::span<double>(acc, 3));
  m.net->train();
  EvalOut e;
  e.loss = acc[2] > 0 ? acc[0] / acc[2] : std::nan("");
  if (data.text)
    e.perplexity = std::exp(e.loss);
  else
    e.accuracy = acc[2] > 0 ? acc[1] / acc[2] : std::nan("");
  return e;
}

nlohmann::json options_json(const TrainOptions& o, int world) {
  nlohmann::json j;
  j["model"] = o.model;
  j["model_width"] = o.model_width;
  j["dataset"] = o.dataset;
  j["data_dir"] = o.data_dir;
  j["sparsifier"] = o.sparsifier;
  j["density"] = o.sparse.density;
  j["gather_mode"] = comm::to_string(o.sparse.gather_mode);
  j["controller"] = core::to_string(o.sparse.exdyna.controller);
  j["balance"] = core::to_string(o.sparse.exdyna.balance);
  j["workers"] = world;
  j["epochs"] = o.epochs;
  j["max_steps"] = o.max_steps;
  j["batch_size_per_worker"] = o.batch_size;
  j["lr"] = o.sgd.lr;
  j["momentum"] = o.sgd.momentum;
  j["nesterov"] = o.sgd.nesterov;
  j["weight_decay"] = o.sgd.weight_decay;
  j["warmup_epochs"] = o.schedule.warmup_epochs;
  j["lr_decay_epochs"] = o.schedule.decay_epochs;
  j["lr_decay_factor"] = o.schedule.decay_factor;
  j["clip_norm"] = o.clip_norm;
  j["seed"] = o.seed;
  j["resume"] = o.resume;
  return j;
}

}  // namespace

DataBundle load_data(const TrainOptions& opts) {
  DataBundle b;
  if (opts.dataset == "text") {
    b.text = std::make_shared<TextCorpus>(load_embedded_corpus(opts.data_dir));
  } else if (opts.dataset == "wikitext2") {
    EXDYNA_CHECK_ARG(!opts.data_dir.empty(),
                     "--dataset wikitext2 needs --data-dir DIR holding wiki.train.tokens, "
                     "wiki.valid.tokens and wiki.test.tokens");
    b.text = std::make_shared<TextCorpus>(load_wikitext2(opts.data_dir));
  } else {
    const auto kind = parse_dataset(opts.dataset);
    b.train_images = limited(load_image_dataset(kind, opts.data_dir, true), opts.train_limit);
    b.test_images = limited(load_image_dataset(kind, opts.data_dir, false), opts.test_limit);
  }
  return b;
}

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

  ModelSpec spec;
  spec.name = opts.model;
  if (lm) {
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
  FlatModel m(spec, opts.seed);
  const std::int64_t n = m.n;

  auto ef = sparsifiers::make_error_feedback(opts.sparsifier, opts.sparse, n, world, rank,
                                             sparsifiers::builtin_registry());
  Sgd sgd(n, opts.sgd);
  LrSchedule sched = opts.schedule;
  sched.base_lr = opts.sgd.lr;

  // Steps per epoch: equal on every rank (equal shards).
  LmShard lms;
  std::int64_t spe;
  std::vector<std::int64_t> shard;
  if (lm) {
    lms = lm_shard(data.text->train, world, rank, opts.batch_size, opts.bptt);
    spe = lms.chunks();
  } else {
    const std::int64_t per = data.train_images->size() / world;
    spe = per / opts.batch_size;
    EXDYNA_CHECK_ARG(spe > 0, "each of the ", world, " workers holds ", per,
                     " training samples, fewer than --batch-size ", opts.batch_size);
  }
  std::int64_t total = opts.epochs * spe;
  if (opts.max_steps > 0) total = std::min(total, opts.max_steps);

  const std::string fingerprint =
      detail::concat("model=", opts.model, "|dataset=", opts.dataset,
                     "|sparsifier=", ef.sparsifier().fingerprint(), "|world=", world,
                     "|batch=", opts.batch_size, "|seed=", opts.seed, "|n_g=", n);
  std::int64_t step = 0;
  double elapsed_before = 0;
  if (!opts.resume.empty()) {
    const auto dir = resolve_resume(opts.resume);
    auto s = load_checkpoint_file(checkpoint_rank_file(dir, rank));
    EXDYNA_CHECK_ARG(s.world == world && s.rank == rank, "checkpoint ", dir, " was written by ",
                     s.world, " workers; this run has ", world);
    EXDYNA_CHECK_ARG(s.fingerprint == fingerprint, "checkpoint ", dir,
                     " belongs to a different configuration:\n  ", s.fingerprint, "\nthis run:\n  ",
                     fingerprint);
    EXDYNA_CHECK_T(DataError,
                   s.params.size() == static_cast<std::size_t>(n) &&
                       s.momentum.size() == s.params.size() && s.residual.size() == s.params.size(),
                   "checkpoint ", dir, " holds vectors of the wrong length for n_g = ", n);
    std::copy(s.params.begin(), s.params.end(), m.p_span().begin());
    std::copy(s.momentum.begin(), s.momentum.end(), sgd.mutable_momentum_buffer().begin());
    std::copy(s.residual.begin(), s.residual.end(), ef.mutable_residual().begin());
    m.set_buffers(s.buffers);
    ef.sparsifier().load_state(s.sparsifier_state);
    ef.set_iteration(s.ef_iteration);
    step = s.step;
    elapsed_before = s.elapsed_s;
  }
  const std::string ckpt_dir = !opts.checkpoint_dir.empty() ? opts.checkpoint_dir
                               : opts.out_dir.empty()
                                   ? std::string()
                                   : (fs::path(opts.out_dir) / "checkpoints").string();

  TrainResult res;
  res.n_g = n;
  const bool writer = rank == 0 && !opts.out_dir.empty();
  Progress progress(total, opts.progress && rank == 0);
  if (rank == 0 && opts.progress)
    progress.message(detail::concat("exdyna train: ", opts.model, " on ",
                                    lm ? data.text->source : data.train_images->name, ", ", world,
                                    " workers on ", comm.engine(), ", sparsifier ", opts.sparsifier,
                                    " at density ", opts.sparse.density, ", n_g = ", n, ", ",
                                    total - step, " steps (", spe, " per epoch)"));
  auto write_logs = [&] {
    if (!writer) return;
    atomic_write((fs::path(opts.out_dir) / "iterations.csv").string(), res.log.iteration_csv());
    atomic_write((fs::path(opts.out_dir) / "eval.csv").string(), res.log.eval_csv());
  };

  core::Stopwatch clock;
  const std::int64_t start_step = step;
  double epoch_loss = 0;
  std::int64_t epoch_steps = 0;
  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1;
  EvalOut last_eval;
  std::vector<double> losses;
  torch::nn::functional::CrossEntropyFuncOptions ce;
  while (step < total) {
    const std::int64_t epoch = step / spe, pos = step % spe;
    if (order_epoch != epoch) {
      if (lm)
        order = shuffled(spe, mix_seed(opts.seed, 0x7e47, static_cast<std::uint64_t>(epoch)));
      else
        order = epoch_shard(data.train_images->size(), world, rank, opts.seed, epoch);
      order_epoch = epoch;
    }
    core::Stopwatch sw;
    torch::Tensor y, x;
    if (lm) {
      x = lm_batch(lms, order[static_cast<std::size_t>(pos)], y);
    } else {
      x = image_batch(*data.train_images,
                      std::span<const std::int64_t>(order).subspan(
                          static_cast<std::size_t>(pos * opts.batch_size),
                          static_cast<std::size_t>(opts.batch_size)),
                      true,
                      mix_seed(opts.seed, static_cast<std::uint64_t>(epoch),
                               static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(step)),
                      y);
    }
    m.flat_g.zero_();
    auto loss = torch::nn::functional::cross_entropy(m.net->forward(x), y, ce);
    loss.backward();
    if (step == start_step) m.check_grad_views();
    double lsum = loss.item<double>();
    IterRecord rec;
    rec.t_compute = sw.lap();
    if (on_gradient) on_gradient(step, std::span<const float>(m.g_span()));
    comm.allreduce_sum(std::span<double>(&lsum, 1));
    rec.loss = lsum / world;
    rec.stats = ef.step(m.g_span(), comm);
    rec.stats.target_density = opts.sparse.density;
    rec.stats.k_target =
        static_cast<std::int64_t>(std::floor(opts.sparse.density * static_cast<double>(n)));
    sw.lap();
    if (opts.clip_norm > 0) clip_grad_norm(m.g_span(), opts.clip_norm);
    rec.lr = sched.at(step, spe);
    sgd.step(m.p_span(), m.g_span(), rec.lr);
    rec.t_optimizer = sw.lap();
    ++step;
    rec.step = step;
    rec.epoch = static_cast<double>(step) / static_cast<double>(spe);
    rec.wall_s = elapsed_before + clock.elapsed();
    losses.push_back(rec.loss);
    epoch_loss += rec.loss;
    ++epoch_steps;
    if (hook) hook(rank, step, m.p_span());
    if (rank == 0) {
      const double run_s = clock.elapsed();
      progress.update(step, run_s, rec.loss, rec.stats.density,
                      static_cast<double>((step - start_step) * opts.batch_size * world) /
                          std::max(run_s, 1e-9));
      res.log.add(std::move(rec));
    }
    if (opts.checkpoint_every > 0 && step % opts.checkpoint_every == 0 && step < total) {
      CheckpointState s;
      s.fingerprint = fingerprint;
      s.rank = rank;
      s.world = world;
      s.step = step;
      s.ef_iteration = ef.iteration();
      s.elapsed_s = elapsed_before + clock.elapsed();
      auto p = m.p_span();
      s.params.assign(p.begin(), p.end());
      auto mb = sgd.momentum_buffer();
      s.momentum.assign(mb.begin(), mb.end());
      auto rs = ef.residual();
      s.residual.assign(rs.begin(), rs.end());
      s.buffers = m.get_buffers();
      s.sparsifier_state = ef.sparsifier().save_state();
      const auto sd = checkpoint_step_dir(ckpt_dir, step);
      save_checkpoint_file(checkpoint_rank_file(sd, rank), s);
      comm.barrier();  // every rank's file is complete before `latest` names the checkpoint
      if (rank == 0) mark_latest(ckpt_dir, sd);
    }
    if (step % spe == 0 || step == total) {
      // Batch-norm statistics differ per rank (each saw its own data): average them, as DDP keeps
      // buffers in sync, so every rank evaluates the same model.
      if (!m.float_buffers.empty()) {
        auto b = m.get_buffers();
        comm.allreduce_sum(std::span<float>(b));
        for (auto& v : b) v /= static_cast<float>(world);
        m.set_buffers(b);
      }
      last_eval = evaluate(m, data, opts, comm);
      if (rank == 0) {
        EvalRecord e;
        e.epoch = (step + spe - 1) / spe;
        e.step = step;
        e.wall_s = elapsed_before + clock.elapsed();
        e.train_loss = epoch_steps ? epoch_loss / static_cast<double>(epoch_steps) : std::nan("");
        e.test_loss = last_eval.loss;
        e.test_accuracy = last_eval.accuracy;
        e.test_perplexity = last_eval.perplexity;
        res.log.add(e);
        std::ostringstream line;
        line << "epoch " << e.epoch << " step " << step << ": train loss " << std::setprecision(4)
             << e.train_loss << ", test loss " << e.test_loss;
        if (lm)
          line << ", test perplexity " << std::setprecision(5) << e.test_perplexity;
        else
          line << ", test accuracy " << std::setprecision(4) << 100 * e.test_accuracy << "%";
        line << ", mean density " << std::setprecision(4) << res.log.mean_density() << " ("
             << std::setprecision(3) << elapsed_before + clock.elapsed() << " s)";
        progress.message(line.str());
        write_logs();
      }
      epoch_loss = 0;
      epoch_steps = 0;
    }
  }
  progress.finish();

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
  const double run_s = clock.elapsed();
  res.elapsed_s = elapsed_before + run_s;
  res.samples_per_s =
      static_cast<double>((step - start_step) * opts.batch_size * world) / std::max(run_s, 1e-9);
  res.mean_density = res.log.mean_density();
  res.mean_f_t = res.log.mean_f_t();
  auto p = m.p_span();
  res.params.assign(p.begin(), p.end());

  if (writer) {
    write_logs();
    const std::string title = opts.model + " " + opts.dataset + " " + opts.sparsifier +
                              " d=" + detail::concat(opts.sparse.density) +
                              " n=" + std::to_string(world);
    std::vector<std::string> plots;
    if (opts.plots)
      plots = write_plots(opts.out_dir, res.log, opts.sparse.density, title, &res.plot_note);
    nlohmann::json j;
    j["options"] = options_json(opts, world);
    j["engine"] = std::string(comm.engine());
    j["n_g"] = n;
    j["steps"] = step;
    j["steps_per_epoch"] = spe;
    auto num = [](double v) {
      return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    j["test_accuracy"] = num(res.test_accuracy);
    j["test_loss"] = num(res.test_loss);
    j["test_perplexity"] = num(res.test_perplexity);
    j["first_train_loss"] = num(res.first_train_loss);
    j["last_train_loss"] = num(res.last_train_loss);
    j["mean_density"] = num(res.mean_density);
    j["mean_density_over_target"] = num(res.mean_density / opts.sparse.density);
    j["mean_f_t"] = num(res.mean_f_t);
    j["elapsed_s"] = res.elapsed_s;
    // FNV-1a of rank 0's final parameter bytes: lets scripts check bit-identical runs.
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *b = reinterpret_cast<const unsigned char*>(res.params.data()),
                             *e = b + res.params.size() * sizeof(float);
         b != e; ++b)
      h = (h ^ *b) * 0x100000001b3ULL;
    std::ostringstream hx;
    hx << std::hex << std::setw(16) << std::setfill('0') << h;
    j["params_fnv1a"] = hx.str();
    j["samples_per_s"] = res.samples_per_s;
    std::uint64_t bytes = 0;
    for (const auto& r : res.log.iters()) bytes += r.stats.bytes.total();
    j["mean_bytes_per_iteration"] =
        res.log.iters().empty()
            ? 0.0
            : static_cast<double>(bytes) / static_cast<double>(res.log.iters().size());
    nlohmann::json ev = nlohmann::json::array();
    for (const auto& e : res.log.evals())
      ev.push_back({{"epoch", e.epoch},
                    {"step", e.step},
                    {"wall_s", e.wall_s},
                    {"train_loss", num(e.train_loss)},
                    {"test_loss", num(e.test_loss)},
                    {"test_accuracy", num(e.test_accuracy)},
                    {"test_perplexity", num(e.test_perplexity)}});
    j["evaluations"] = ev;
    res.files.push_back((fs::path(opts.out_dir) / "iterations.csv").string());
    res.files.push_back((fs::path(opts.out_dir) / "eval.csv").string());
    const auto summary = (fs::path(opts.out_dir) / "summary.json").string();
    res.files.push_back(summary);
    for (const auto& f : plots) res.files.push_back(f);
    j["files"] = res.files;
    j["plot_note"] = res.plot_note;
    atomic_write(summary, j.dump(2) + "\n");
  }
  return res;
}

std::string summary_table(const TrainOptions& o, int world, const TrainResult& r) {
  std::ostringstream os;
  auto row = [&](const std::string& k, const std::string& v) {
    os << "  " << std::left << std::setw(28) << k << v << "\n";
  };
  auto f = [](double v, int prec) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(prec) << v;
    return s.str();
  };
  os << "\nexdyna train: summary\n";
  row("model / dataset", o.model + " / " + o.dataset);
  row("sparsifier", o.sparsifier + " (target density " + detail::concat(o.sparse.density) + ")");
  row("workers", std::to_string(world));
  row("steps", std::to_string(r.steps) + " (n_g = " + std::to_string(r.n_g) + ")");
  if (o.model == "lstm")
    row("test perplexity", f(r.test_perplexity, 2));
  else
    row("test accuracy", f(100 * r.test_accuracy, 2) + " %");
  row("test loss", f(r.test_loss, 4));
  row("train loss first -> last", f(r.first_train_loss, 4) + " -> " + f(r.last_train_loss, 4));
  row("mean actual density", f(r.mean_density, 6) + " (" +
                                 f(100 * r.mean_density / o.sparse.density, 1) + " % of target)");
  row("mean f(t)", f(r.mean_f_t, 3));
  row("wall time", f(r.elapsed_s, 1) + " s");
  row("throughput", f(r.samples_per_s, 0) + (o.model == "lstm" ? " sequences/s" : " samples/s"));
  if (!r.files.empty()) {
    os << "  files:\n";
    for (const auto& p : r.files) os << "    " << p << "\n";
  }
  if (!r.plot_note.empty()) os << "  note: " << r.plot_note << "\n";
  return os.str();
}

}  // namespace exdyna::train
