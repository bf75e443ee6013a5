#include "exdyna/train/batches.hpp"

#include <utility>

#include "exdyna/core/error.hpp"

namespace exdyna::train {

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

namespace {

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

}  // namespace

BatchSource::BatchSource(const TrainOptions& opts, const DataBundle& data, int world, int rank)
    : opts_(opts), data_(data), world_(world), rank_(rank) {
  if (data.text) {
    lms_ = lm_shard(data.text->train, world, rank, opts.batch_size, opts.bptt);
    spe_ = lms_.chunks();
  } else {
    const std::int64_t per = data.train_images->size() / world;
    spe_ = per / opts.batch_size;
    EXDYNA_CHECK_ARG(spe_ > 0, "each of the ", world, " workers holds ", per,
                     " training samples, fewer than --batch-size ", opts.batch_size);
  }
}

torch::Tensor BatchSource::batch(std::int64_t step, torch::Tensor& y) {
  const bool lm = data_.text != nullptr;
  const std::int64_t epoch = step / spe_, pos = step % spe_;
  if (order_epoch_ != epoch) {
    if (lm)
      order_ = shuffled(spe_, mix_seed(opts_.seed, 0x7e47, static_cast<std::uint64_t>(epoch)));
    else
      order_ = epoch_shard(data_.train_images->size(), world_, rank_, opts_.seed, epoch);
    order_epoch_ = epoch;
  }
  if (lm) return lm_batch(lms_, order_[static_cast<std::size_t>(pos)], y);
  return image_batch(*data_.train_images,
                     std::span<const std::int64_t>(order_).subspan(
                         static_cast<std::size_t>(pos * opts_.batch_size),
                         static_cast<std::size_t>(opts_.batch_size)),
                     true,
                     mix_seed(opts_.seed, static_cast<std::uint64_t>(epoch),
                              static_cast<std::uint64_t>(rank_), static_cast<std::uint64_t>(step)),
                     y);
}

}  // namespace exdyna::train
