// TrainOptions::validate and load_data: the options and the data of a run. Torch-free.
#include <memory>

#include "exdyna/core/error.hpp"
#include "exdyna/train/dgc_momentum.hpp"
#include "exdyna/train/trainer.hpp"

namespace exdyna::train {

void TrainOptions::validate() const {
  EXDYNA_CHECK_ARG(epochs > 0, "--epochs ", epochs, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(max_steps >= 0, "--max-steps ", max_steps, " is not valid; expected >= 0");
  EXDYNA_CHECK_ARG(batch_size > 0, "--batch-size ", batch_size,
                   " is not valid; expected > 0 (per worker)");
  EXDYNA_CHECK_ARG(bptt > 1, "--bptt ", bptt, " is not valid; expected > 1");
  EXDYNA_CHECK_ARG(lm_embed > 0, "--embed ", lm_embed, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(lm_hidden > 0, "--hidden ", lm_hidden, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(lm_layers > 0, "--lstm-layers ", lm_layers, " is not valid; expected > 0");
  EXDYNA_CHECK_ARG(model_width > 0 && model_width <= 4, "--model-width ", model_width,
                   " is not valid; expected in (0, 4]");
  EXDYNA_CHECK_ARG(clip_norm >= 0, "--clip ", clip_norm, " is not valid; expected >= 0 (0 = off)");
  EXDYNA_CHECK_ARG(checkpoint_every >= 0, "--checkpoint-every ", checkpoint_every,
                   " is not valid; expected >= 0");
  EXDYNA_CHECK_ARG(checkpoint_every == 0 || !out_dir.empty() || !checkpoint_dir.empty(),
                   "--checkpoint-every needs --out DIR");
  sgd.validate();
  EXDYNA_CHECK_ARG(sparsifier != "dgc" || !sgd.nesterov,
                   "--nesterov is not supported with --sparsifier dgc (its momentum correction is "
                   "for plain momentum)");
  validate_dgc_warmup(dgc_warmup_epochs, dgc_warmup_start, sparse.density);
  const double mc = sparse.convergence.momentum_correction;
  EXDYNA_CHECK_ARG(mc == 0 || sgd.momentum == 0, "--momentum-correction ", mc,
                   " puts the momentum into the update, and --momentum ", sgd.momentum,
                   " would apply it again; expected --momentum 0 with it");
  EXDYNA_CHECK_ARG(mc == 0 || sparsifier != "dgc", "--momentum-correction ", mc,
                   " is not for --sparsifier dgc, whose momentum correction is --momentum's");
  EXDYNA_CHECK_ARG(dgc_warmup_epochs == 0 || sparsifier == "dgc", "--dgc-warmup-epochs ",
                   dgc_warmup_epochs, " needs --sparsifier dgc (this run uses ", sparsifier, ")");
  auto s = schedule;
  s.base_lr = sgd.lr;
  s.validate();
}

namespace {

std::shared_ptr<ImageDataset> limited(ImageDataset d, std::int64_t limit) {
  if (limit > 0 && limit < d.size()) {
    d.labels.resize(static_cast<std::size_t>(limit));
    d.pixels.resize(static_cast<std::size_t>(limit * d.sample_bytes()));
  }
  return std::make_shared<ImageDataset>(std::move(d));
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

}  // namespace exdyna::train
