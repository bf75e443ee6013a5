#include "exdyna/sim/synthetic_source.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <numeric>
#include <sstream>

#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/core/huge_pages.hpp"

// The values must not depend on which instruction set the kernel below is dispatched to: GCC
// contracts a * b + c into an FMA (one rounding instead of two) by default in C++ where FMA is
// available (the AVX-512 clone), so contraction is switched off for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace exdyna::sim {

namespace {

constexpr std::uint64_t kGolden = core::kSplitMixGamma;
// SplitMix64's finaliser (core/hash.hpp), by its short name here.
inline std::uint64_t mix64(std::uint64_t z) {
  return core::splitmix64_mix(z);
}

// A 32-bit bijective mix (Wellons' "lowbias32" constants). 32-bit multiplies vectorise, so the
// per-element hashing runs several lanes at a time.
inline std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The random bits of element i in the stream keyed by key (64 bits from mix64 of the stream's
// coordinates): two rounds of mix32 with the key's halves, so distinct keys give unrelated
// sequences.
inline std::uint32_t element_bits(std::uint64_t key, std::uint32_t i) {
  return mix32(mix32(i ^ static_cast<std::uint32_t>(key)) + static_cast<std::uint32_t>(key >> 32));
}

// ln(x) for a normal float x > 0, to ~3e-8 relative: x = m * 2^e with m in [sqrt(1/2), sqrt(2))
// (found by offsetting the bits by those of sqrt(1/2), so no branch), ln m = 2 atanh(s) with
// s = (m - 1) / (m + 1), |s| < 0.172, by its series to s^7. Branch-free so the loop vectorises.
inline float fast_log(float x) {
  constexpr std::int32_t kSqrtHalf = 0x3f3504f3;
  const std::int32_t b = std::bit_cast<std::int32_t>(x) - kSqrtHalf;
  const std::int32_t e = b >> 23;  // arithmetic shift: floor
  const float m = std::bit_cast<float>((b & 0x007fffff) + kSqrtHalf);
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  const float ln_m = 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7))));
  return static_cast<float>(e) * 0.69314718f + ln_m;
}

// A unit Laplace variate (density exp(-|x|)/2) from 32 random bits: 24 bits give u in (0, 1),
// -ln u is exponential, bit 0 is the sign.
inline float laplace(std::uint32_t h) {
  const float u = (static_cast<float>(h >> 8) + 0.5f) * 0x1.0p-24f;
  const float mag = -fast_log(u);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(mag) | (h << 31));
}

// Keys of the shared stream of iteration t and of worker w's noise stream; distinct domains so no
// two streams coincide.
std::uint64_t shared_key(std::uint64_t seed, std::int64_t t) {
  return mix64(mix64(seed ^ 0x5348415245440000ull) + mix64(static_cast<std::uint64_t>(t) + 1));
}
std::uint64_t worker_key(std::uint64_t seed, std::int64_t t, int w) {
  return mix64(
      mix64(seed ^ 0x4e4f495345000000ull) +
      mix64(static_cast<std::uint64_t>(t) * 0x100000001b3ull + static_cast<std::uint64_t>(w) + 7));
}

// g[i] = es[i] * (a_s * X[i] + a_n * Y[i]) with X, Y Laplace from the streams keyed ks and kw.
// Built for AVX2 too where the compiler can (ifunc dispatch at load time): the integer and IEEE
// float operations used give the same bits in both versions.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void fill_kernel(float* __restrict g, const float* __restrict es, std::size_t n, std::uint64_t ks,
                 std::uint64_t kw, float a_s, float a_n) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto ii = static_cast<std::uint32_t>(i);
    g[i] = es[i] * (a_s * laplace(element_bits(ks, ii)) + a_n * laplace(element_bits(kw, ii)));
  }
}

}  // namespace

ScaleStep parse_scale_step(std::string_view text) {
  const auto colon = text.find(':');
  ScaleStep s;
  bool ok = colon != std::string_view::npos;
  if (ok) {
    const auto it = text.substr(0, colon);
    const auto fac = std::string(text.substr(colon + 1));
    auto r = std::from_chars(it.data(), it.data() + it.size(), s.iteration);
    ok = r.ec == std::errc() && r.ptr == it.data() + it.size() && !it.empty();
    if (ok) {
      std::size_t used = 0;
      try {
        s.factor = std::stod(fac, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      ok = used > 0 && used == fac.size();
    }
  }
  EXDYNA_CHECK_ARG(ok, "scale step '", text, "' is not valid; expected ITER:FACTOR, e.g. 1000:0.1");
  EXDYNA_CHECK_ARG(s.iteration >= 0, "scale step '", text, "': iteration ", s.iteration,
                   " is not valid; expected >= 0");
  EXDYNA_CHECK_ARG(std::isfinite(s.factor) && s.factor > 0, "scale step '", text, "': factor ",
                   s.factor, " is not valid; expected a finite value > 0");
  return s;
}

void SyntheticOptions::validate() const {
  EXDYNA_CHECK_ARG(n_g > 0, "n_g ", n_g, " is not valid; expected a gradient length > 0");
  EXDYNA_CHECK_ARG(static_cast<std::uint64_t>(n_g) < (std::uint64_t{1} << 32), "n_g ", n_g,
                   " is not supported; expected n_g < 2^32");
  EXDYNA_CHECK_ARG(layers >= 1 && layers <= n_g, "layers ", layers,
                   " is not valid; expected 1..n_g (n_g = ", n_g, ")");
  EXDYNA_CHECK_ARG(std::isfinite(decades) && decades >= 0 && decades <= 8, "decades ", decades,
                   " is not valid; expected a value in [0, 8]");
  EXDYNA_CHECK_ARG(std::isfinite(decay) && decay >= 0 && decay < 1, "decay ", decay,
                   " is not valid; expected a value in [0, 1)");
  EXDYNA_CHECK_ARG(std::isfinite(shared) && shared >= 0 && shared <= 1, "shared fraction ", shared,
                   " is not valid; expected a value in [0, 1]");
  EXDYNA_CHECK_ARG(std::isfinite(scale) && scale > 0, "scale ", scale,
                   " is not valid; expected a finite value > 0");
  for (const auto& s : scale_steps) {
    EXDYNA_CHECK_ARG(s.iteration >= 0, "scale step iteration ", s.iteration,
                     " is not valid; expected >= 0");
    EXDYNA_CHECK_ARG(std::isfinite(s.factor) && s.factor > 0, "scale step factor ", s.factor,
                     " is not valid; expected a finite value > 0");
  }
}

std::string SyntheticOptions::describe() const {
  std::ostringstream os;
  os << "synthetic (" << layers << " layers over " << decades << " decades, seed " << seed
     << ", decay " << decay << ", shared " << shared;
  if (scale != 1) os << ", scale " << scale;
  for (const auto& s : scale_steps) os << ", x" << s.factor << " at " << s.iteration;
  os << ")";
  return os.str();
}

SyntheticSource::SyntheticSource(SyntheticOptions opt) : opt_(std::move(opt)) {
  opt_.validate();
  std::sort(opt_.scale_steps.begin(), opt_.scale_steps.end(),
            [](const ScaleStep& a, const ScaleStep& b) { return a.iteration < b.iteration; });
  const auto L = static_cast<std::size_t>(opt_.layers);
  core::SplitMix64 rng(opt_.seed * kGolden ^ 0x4c41594552530000ull);  // one-off draws

  // Layer sizes: one element each, the rest in proportion to log-uniform weights over [1, 64].
  std::vector<double> weight(L);
  for (auto& w : weight) w = std::exp(rng.uniform_open() * std::log(64.0));
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  const std::int64_t rest = opt_.n_g - opt_.layers;
  layer_begin_.resize(L + 1);
  double cum = 0;
  for (std::size_t l = 0; l < L; ++l) {
    layer_begin_[l] =
        static_cast<std::int64_t>(l) +
        static_cast<std::int64_t>(std::floor(static_cast<double>(rest) * cum / total));
    cum += weight[l];
  }
  layer_begin_[L] = opt_.n_g;

  // Layer scales: evenly spaced in log10 over `decades`, from kTopScale down, in a seeded order.
  std::vector<std::size_t> order(L);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t l = L; l > 1; --l) std::swap(order[l - 1], order[rng.next() % l]);
  const double size_factor =
      std::sqrt(static_cast<double>(kReferenceNg) / static_cast<double>(opt_.n_g));
  layer_scale_.resize(L);
  for (std::size_t l = 0; l < L; ++l) {
    const double pos = L > 1 ? static_cast<double>(order[l]) / static_cast<double>(L - 1) : 0.5;
    layer_scale_[l] = kTopScale * std::pow(10.0, -opt_.decades * pos) * size_factor;
  }

  // Per-element factors c_i = exp(sigma z - sigma^2 / 2) (mean 1), z ~ N(0, 1) by Irwin-Hall of
  // four uniforms (bounded at 3.5 sigma: no absurd outliers).
  constexpr double kSigma = 0.5;
  core::resize_huge(element_scale_, static_cast<std::size_t>(opt_.n_g));
  const std::uint64_t ekey = mix64(opt_.seed ^ 0x454c454d454e5400ull);
  for (std::size_t l = 0; l < L; ++l) {
    for (std::int64_t i = layer_begin_[l]; i < layer_begin_[l + 1]; ++i) {
      const std::uint64_t h1 = mix64(ekey + static_cast<std::uint64_t>(i) * kGolden);
      const std::uint64_t h2 = mix64(h1);
      const double s = static_cast<double>(h1 & 0xffffffffu) + static_cast<double>(h1 >> 32) +
                       static_cast<double>(h2 & 0xffffffffu) + static_cast<double>(h2 >> 32);
      const double z = (s * 0x1.0p-32 - 2.0) * std::sqrt(3.0);
      element_scale_[static_cast<std::size_t>(i)] =
          static_cast<float>(layer_scale_[l] * std::exp(kSigma * z - 0.5 * kSigma * kSigma));
    }
  }
}

double SyntheticSource::amplitude(std::int64_t t) const {
  double a = opt_.scale * std::exp(-opt_.decay * static_cast<double>(t));
  for (const auto& s : opt_.scale_steps)
    if (t >= s.iteration) a *= s.factor;
  return a;
}

void SyntheticSource::fill(std::int64_t t, int worker, std::span<float> grad) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(grad.size()) == opt_.n_g,
                   "synthetic source: buffer has ", grad.size(),
                   " elements, expected n_g = ", opt_.n_g);
  EXDYNA_CHECK_ARG(t >= 0 && worker >= 0, "synthetic source: iteration ", t, " and worker ", worker,
                   " are not valid; expected both >= 0");
  const double a = amplitude(t);
  const auto a_shared = static_cast<float>(a * std::sqrt(opt_.shared));
  const auto a_noise = static_cast<float>(a * std::sqrt(1.0 - opt_.shared));
  const std::uint64_t ks = shared_key(opt_.seed, t), kw = worker_key(opt_.seed, t, worker);
  fill_kernel(grad.data(), element_scale_.data(), grad.size(), ks, kw, a_shared, a_noise);
}

}  // namespace exdyna::sim
