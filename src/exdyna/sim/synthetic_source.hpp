// A synthetic gradient stream for `exdyna simulate`: cheap to generate, seeded, and shaped like the
// gradients of a deep network where it matters to a sparsifier.
//
// Model. The flat gradient of n_g elements is cut into `layers` contiguous layers whose sizes vary
// (log-uniform over a 64x range, drawn from the seed). Layer l has a typical magnitude s_l; the
// s_l are spaced evenly in log10 over `decades` decades (default 3: 1e-1 down to 1e-4 at the
// reference size, see below) and assigned to layers in a seeded random order, so large and small
// scales sit anywhere in the vector (as embedding, convolution and normalisation layers do). Each
// element i also carries a fixed log-normal factor c_i (sigma 0.5, mean 1), so some coordinates are
// persistently more active than others. Worker w's gradient at iteration t is
//
//   g_{t,w}[i] = a(t) * s_layer(i) * c_i * ( sqrt(rho) * X_t[i] + sqrt(1 - rho) * Y_{t,w}[i] )
//
// where X_t (shared by every worker: the "true" gradient) and Y_{t,w} (per-worker mini-batch
// noise) are independent unit Laplace variates (density exp(-|x|)/2, mean |x| = 1), rho = `shared`,
// and a(t) = scale * exp(-decay * t) * prod of the factors of every scale step at or before t
// (a step models a learning-rate decay: the gradient scale changes at once by the factor).
// A Laplace scale mixture (Laplace times a log-normal, over layers three decades apart) is heavy
// tailed: the top 1% of |g| lies far above the bulk, as in real gradients.
//
// Size. The total gradient norm of a network hardly depends on its size, so per-element magnitudes
// shrink like 1/sqrt(n_g): the layer scales are those above at the reference size n_g = 2^22 and
// are multiplied by sqrt(2^22 / n_g) otherwise. This keeps ExDyna's default first threshold
// 1/(2 sqrt(k)), which scales the same way, equally plausible (and equally inexact) at every n_g.
//
// Randomness is counter based: every variate is splitmix64 of (seed, t, w, i), so any (t, w) is
// generated on its own, in any order, concurrently from many threads, and the same (seed, t, w, i)
// always gives the same float (the log is a fixed polynomial, not libm), whichever engine or
// process asks. About 1.5 ns of CPU per element with the AVX-512 kernel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "exdyna/sim/gradient_source.hpp"

namespace exdyna::sim {

// From iteration `iteration` on, the gradient scale is multiplied by `factor`.
struct ScaleStep {
  std::int64_t iteration = 0;
  double factor = 1;
};
// Parses "ITER:FACTOR" (e.g. "1000:0.1"); throws InvalidArgument naming the text.
ScaleStep parse_scale_step(std::string_view text);

struct SyntheticOptions {
  std::int64_t n_g = std::int64_t{1} << 20;
  int layers = 32;  // contiguous layers, 1..n_g
  std::uint64_t seed = 1;
  double decades = 3;   // spread of layer scales, log10, in [0, 8]
  double decay = 5e-4;  // a(t) shrinks like exp(-decay * t); >= 0
  double shared = 0.5;  // rho: fraction of the variance shared by all workers, in [0, 1]
  double scale = 1;     // overall multiplier of a(t); > 0
  std::vector<ScaleStep> scale_steps;

  // Throws InvalidArgument naming the option, the value and the allowed range.
  void validate() const;
  std::string describe() const;
};

class SyntheticSource final : public GradientSource {
 public:
  static constexpr std::int64_t kReferenceNg = std::int64_t{1} << 22;
  // Typical magnitude of the most active layer at the reference size.
  static constexpr double kTopScale = 2e-3;

  explicit SyntheticSource(SyntheticOptions opt);

  std::int64_t n_g() const override { return opt_.n_g; }
  std::int64_t iterations() const override { return -1; }
  int workers() const override { return -1; }  // any number of workers
  void fill(std::int64_t t, int worker, std::span<float> grad) override;

  const SyntheticOptions& options() const { return opt_; }
  // Layer l spans [layer_begin(l), layer_begin(l + 1)); layer_begin(layers) == n_g.
  std::int64_t layer_begin(int l) const { return layer_begin_[static_cast<std::size_t>(l)]; }
  // Typical magnitude s_l of layer l at iteration 0 (after the size correction).
  double layer_scale(int l) const { return layer_scale_[static_cast<std::size_t>(l)]; }
  // a(t): the iteration's overall factor (decay and scale steps).
  double amplitude(std::int64_t t) const;

 private:
  SyntheticOptions opt_;
  std::vector<std::int64_t> layer_begin_;
  std::vector<double> layer_scale_;
  std::vector<float> element_scale_;  // s_layer(i) * c_i, read-only after construction
};

}  // namespace exdyna::sim
