// exdyna_cuda_check: every function of core/device_kernels.hpp and
// sparsifiers/exdyna/device_kernels.hpp against its CPU counterpart on the same data (random and
// adversarial: sizes 1, 31, 1000, 2^20 + 7 and 25M; thresholds selecting nothing, a few, about 1 %,
// half and everything; NaN, Inf, -0 and denormals in the input; exact ties and ties inside one
// 1/256 sub-bin; every kind of ladder (the paper-mode ladder of 129 rungs at 16 per octave, the
// cold ladder, 33 rungs at 4 per octave, 257 rungs at 1024 per octave, a ladder from 0, a ladder at
// the top of the floats); cuts at rung 0, the top rung and the rungs that hold values, with quota
// 0, 1, a part and the whole bin; offsets 0, large, and wrapping past 2^32; a misaligned partition
// pointer for the scalar paths; the exact controller's plan from gathered ladder slots, the ladder
// slot's encoding, the fused slot's packing and the fused all-gather's unpacking).
//
// Plain main, no test framework: exits 0 when everything matched, 1 on the first mismatch (printed
// with what differs), 77 when no CUDA device is present (CTest: skipped), 2 on bad arguments.
//   exdyna_cuda_check [--quick]   (--quick: without the 25M inputs)
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/reductions.hpp"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_plan.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"
#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_wire.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace core = exdyna::core;
namespace sparsifiers = exdyna::sparsifiers;
// The device kernels: core's (workspace, buffers, reductions, updates) and ExDyna's (selection,
// ladder, cut, blocks).
namespace dev {
using namespace exdyna::core::device;         // NOLINT(google-build-using-namespace)
using namespace exdyna::sparsifiers::device;  // NOLINT(google-build-using-namespace)
}  // namespace dev

namespace {

long g_checks = 0;
long g_cuts = 0;  // take_cut checks so far

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "exdyna_cuda_check: MISMATCH: %s\n", what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

template <typename... A>
std::string str(const A&... a) {
  return exdyna::detail::concat(a...);
}

std::uint32_t bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}
float from_bits(std::uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

std::string fstr(float v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g (0x%08x)", static_cast<double>(v), bits(v));
  return b;
}

// The first index where two index vectors differ, for the message.
template <typename T>
void compare_vectors(const std::vector<T>& cpu, const std::vector<T>& gpu, std::size_t count,
                     const std::string& ctx) {
  for (std::size_t j = 0; j < count; ++j)
    if (cpu[j] != gpu[j])
      fail(str(ctx, ": entry ", j, " of ", count, ": cpu ", cpu[j], ", gpu ", gpu[j]));
}

// ---- inputs ----

struct Input {
  std::string name;
  std::vector<float> x;
};

std::vector<float> gaussian(std::size_t n, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  return x;
}

// Sprinkles NaN, +-Inf, -0, denormals, FLT_MAX and exact zeros.
void add_specials(std::vector<float>& x, std::mt19937_64& rng) {
  if (x.empty()) return;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -0.0f,
                            0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -1e-40f,
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            from_bits(0x7f800001u)};  // a signalling NaN's bits
  std::uniform_int_distribution<std::size_t> pos(0, x.size() - 1);
  const std::size_t count = std::max<std::size_t>(1, x.size() / 500);
  for (std::size_t i = 0; i < count; ++i) x[pos(rng)] = specials[i % std::size(specials)];
}

// Many exact ties (a few distinct magnitudes) and near-ties inside one sub-bin (the same top
// mantissa bits, different low bits), with random signs.
std::vector<float> ties(std::size_t n, std::mt19937_64& rng) {
  std::vector<float> mags;
  for (int e = -6; e <= 2; ++e)
    for (int k = 0; k < 4; ++k) mags.push_back(std::ldexp(1.0f + 0.25f * k, e));
  const std::uint32_t base = bits(0.75f);
  for (std::uint32_t low = 0; low < 16; ++low)
    mags.push_back(from_bits(base | low));  // one sub-bin
  for (std::uint32_t low = 0; low < 8; ++low)
    mags.push_back(from_bits(base + (low << 12)));  // neighbouring sub-bins at 16 per octave
  std::uniform_int_distribution<std::size_t> pick(0, mags.size() - 1);
  std::bernoulli_distribution neg(0.5), zero(0.3);
  std::vector<float> x(n);
  for (auto& v : x) {
    v = zero(rng) ? 0.0f : mags[pick(rng)];
    if (neg(rng)) v = -v;
  }
  return x;
}

std::vector<Input> inputs_of(std::size_t n, std::mt19937_64& rng, bool all_kinds) {
  std::vector<Input> in;
  in.push_back({"gaussian", gaussian(n, rng, 1e-3f)});
  if (all_kinds) {
    auto s = gaussian(n, rng, 1.0f);
    add_specials(s, rng);
    in.push_back({"gaussian+specials", std::move(s)});
    in.push_back({"ties", ties(n, rng)});
    in.push_back({"zeros", std::vector<float>(n, 0.0f)});
  } else {
    auto t = ties(n, rng);
    add_specials(t, rng);
    in.push_back({"ties+specials", std::move(t)});
  }
  return in;
}

// ---- thresholds and grids derived from the data ----

// |x| sorted descending, NaN left out.
std::vector<float> sorted_abs(const std::vector<float>& x) {
  std::vector<float> a;
  a.reserve(x.size());
  for (float v : x)
    if (!std::isnan(v)) a.push_back(std::fabs(v));
  std::sort(a.begin(), a.end(), std::greater<float>());
  return a;
}

std::vector<float> thresholds_of(const std::vector<float>& sa) {
  std::vector<float> t = {0.0f,                                      // everything but NaN
                          std::numeric_limits<float>::denorm_min(),  // everything but zeros
                          std::numeric_limits<float>::infinity(),    // only Inf
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::quiet_NaN()};  // nothing
  if (!sa.empty()) {
    t.push_back(std::nextafter(sa.front(), std::numeric_limits<float>::infinity()));  // nothing
    t.push_back(sa.front());                                                          // the max
    for (double q : {0.0001, 0.001, 0.01, 0.5})
      t.push_back(sa[std::min(sa.size() - 1, static_cast<std::size_t>(q * sa.size()))]);
    t.push_back(sa[std::min<std::size_t>(sa.size() - 1, 2)]);  // a few
  }
  return t;
}

std::vector<std::pair<std::string, sparsifiers::LadderGrid>> grids_of(
    const std::vector<float>& sa) {
  std::vector<std::pair<std::string, sparsifiers::LadderGrid>> g;
  const float max_abs = sa.empty() ? 1.0f : std::min(sa.front(), std::numeric_limits<float>::max());
  float thr = sa.empty() ? 1e-3f : sa[std::min(sa.size() - 1, sa.size() / 100)];
  if (!(thr > 0)) thr = 1e-3f;
  auto around = [&](int m, int rungs, int below) {
    sparsifiers::LadderGrid l;
    l.mant_bits = m;
    l.rungs = rungs;
    const std::uint32_t c = sparsifiers::ladder_key(thr, m);
    l.lo_key = c > static_cast<std::uint32_t>(below) ? c - static_cast<std::uint32_t>(below) : 0;
    return l;
  };
  g.push_back({"m4x129", around(4, 129, 64)});
  g.push_back({"cold129", sparsifiers::cold_ladder(max_abs, 129)});
  g.push_back({"m2x33", around(2, 33, 16)});
  g.push_back({"m10x257", around(10, 257, 128)});
  g.push_back({"m7x256", around(7, 256, 200)});
  g.push_back({"m0x2", around(0, 2, 1)});
  sparsifiers::LadderGrid zero;  // rung 0 = 0: every value but NaN is a candidate
  zero.mant_bits = 3;
  zero.rungs = 100;
  zero.lo_key = 0;
  g.push_back({"from0", zero});
  sparsifiers::LadderGrid top;  // rungs at and past Inf (value() clamps to Inf)
  top.mant_bits = 1;
  top.rungs = 8;
  top.lo_key = (0x7f800000u >> 22) - 4;
  g.push_back({"at_inf", top});
  // Not a ladder with lo_key past Inf's key (every rung at Inf, Inf's bin wrapping to the top):
  // no controller makes one, and there the CPU's own kernels disagree (take_cut_avx512 keeps
  // none of the wrapped values at rung 0, take_cut_scalar keeps them all).
  return g;
}

// ---- the checks ----

void check_select(dev::Workspace& ws, std::span<const float> part, const float* d_part,
                  dev::Buffer<std::uint32_t>& d_out, float thr, std::uint32_t offset,
                  const std::string& ctx) {
  std::vector<std::uint32_t> cpu(part.size() + 1), gpu(part.size() + 1);
  const std::size_t c = sparsifiers::select_threshold(part, thr, offset, cpu.data());
  const std::int64_t g = dev::select_threshold(ws, d_part, static_cast<std::int64_t>(part.size()),
                                               thr, offset, d_out.data());
  const std::string where = str(ctx, " select_threshold thr=", fstr(thr), " offset=", offset);
  if (static_cast<std::int64_t>(c) != g) fail(str(where, ": count cpu ", c, ", gpu ", g));
  dev::copy_to_host(ws, gpu.data(), d_out.data(), c * sizeof(std::uint32_t));
  compare_vectors(cpu, gpu, c, where);
  ++g_checks;
}

void check_ladder(dev::Workspace& ws, std::span<const float> part, const float* d_part,
                  const sparsifiers::LadderGrid& grid, const std::string& ctx) {
  const auto R = static_cast<std::size_t>(grid.rungs);
  std::vector<std::int64_t> cpu(R), gpu(R);
  for (std::size_t j = 0; j < R; ++j) cpu[j] = gpu[j] = static_cast<std::int64_t>(3 * j + 1);
  std::vector<std::uint8_t> scratch(part.size() + 64);
  const std::size_t c =
      sparsifiers::count_ladder_candidates(part, grid, cpu.data(), scratch.data());
  const std::int64_t g =
      dev::ladder_count(ws, d_part, static_cast<std::int64_t>(part.size()), grid, gpu.data());
  const std::string where =
      str(ctx, " ladder_count m=", grid.mant_bits, " R=", grid.rungs, " lo_key=", grid.lo_key);
  if (static_cast<std::int64_t>(c) != g) fail(str(where, ": count cpu ", c, ", gpu ", g));
  compare_vectors(cpu, gpu, R, where + " bins");
  // ladder_count_async: the bins overwritten in device memory, the count beside them.
  dev::Buffer<std::int64_t> d_bins(R + 1);
  dev::ladder_count_async(ws, d_part, static_cast<std::int64_t>(part.size()), grid, d_bins.data(),
                          d_bins.data() + R);
  std::vector<std::int64_t> async(R + 1);
  dev::copy_to_host(ws, async.data(), d_bins.data(), (R + 1) * 8);
  if (async[R] != static_cast<std::int64_t>(c))
    fail(str(where, " (async): count cpu ", c, ", gpu ", async[R]));
  for (std::size_t j = 0; j < R; ++j) cpu[j] -= static_cast<std::int64_t>(3 * j + 1);
  compare_vectors(cpu, async, R, where + " bins (async)");
  g_checks += 2;
}

// take_cut_async of (rung, quota) against the CPU's cut (c indices in cpu); expect_status: its
// status (then nothing is kept).
void check_cut_async(dev::Workspace& ws, const float* d_part, dev::Buffer<std::uint32_t>& d_out,
                     std::int64_t n, std::uint32_t offset, const sparsifiers::LadderGrid& grid,
                     std::int64_t rung, std::int64_t quota, const std::vector<std::uint32_t>& cpu,
                     std::size_t c, int expect_status, const std::string& where) {
  dev::Buffer<std::int64_t> d_rq(3);
  dev::Buffer<std::uint32_t> d_kept(1);
  const std::int64_t rq[2] = {rung, quota};
  dev::copy_to_device(ws, d_rq.data(), rq, 16);
  dev::take_cut_async(ws, d_part, n, offset, grid, d_rq.data(), d_out.data(), d_kept.data(),
                      d_rq.data() + 2);
  std::int64_t status = -1;
  std::uint32_t kept = 0;
  dev::copy_to_host(ws, &status, d_rq.data() + 2, 8);
  dev::copy_to_host(ws, &kept, d_kept.data(), 4);
  if (status != expect_status || kept != (expect_status == 0 ? c : 0))
    fail(str(where, " (async): status ", status, " kept ", kept, "; expected ", expect_status,
             " and ", expect_status == 0 ? c : 0));
  std::vector<std::uint32_t> gpu(c);
  dev::copy_to_host(ws, gpu.data(), d_out.data(), c * sizeof(std::uint32_t));
  if (expect_status == 0) compare_vectors(cpu, gpu, c, where + " (async)");
  ++g_checks;
}

// Every cut of interest on one grid: CPU collect + take_cut against the device's take_cut.
void check_cuts(dev::Workspace& ws, std::span<const float> part, const float* d_part,
                dev::Buffer<std::uint32_t>& d_out, const sparsifiers::LadderGrid& grid,
                std::uint32_t offset, bool many, const std::string& ctx) {
  const std::size_t n = part.size();
  const auto R = grid.rungs;
  std::vector<std::uint32_t> idx(n + 64);
  std::vector<float> abs(n + 64);
  std::vector<std::int64_t> bins(static_cast<std::size_t>(R), 0);
  const std::size_t count = sparsifiers::collect_ladder_candidates(part, offset, grid, idx.data(),
                                                                   abs.data(), bins.data());
  // The rungs: 0, the top, and (many: all, else a few) of those that hold values.
  std::vector<int> rungs = {0, R - 1};
  std::vector<int> held;
  for (int j = 0; j < R; ++j)
    if (bins[static_cast<std::size_t>(j)] > 0) held.push_back(j);
  if (many || held.size() <= 4) {
    rungs.insert(rungs.end(), held.begin(), held.end());
  } else {
    rungs.push_back(held.front());
    rungs.push_back(held[held.size() / 2]);
    rungs.push_back(held.back());
  }
  std::sort(rungs.begin(), rungs.end());
  rungs.erase(std::unique(rungs.begin(), rungs.end()), rungs.end());
  std::vector<std::uint32_t> cidx(n + 64), gpu(n + 64);
  std::vector<float> cabs(n + 64);
  for (const int r : rungs) {
    const std::int64_t in_bin = bins[static_cast<std::size_t>(r)];
    std::vector<std::int64_t> quotas = {0, 1, in_bin / 3, in_bin - 1, in_bin};
    std::sort(quotas.begin(), quotas.end());
    quotas.erase(std::unique(quotas.begin(), quotas.end()), quotas.end());
    for (const std::int64_t q : quotas) {
      if (q < 0 || q > in_bin) continue;
      std::copy_n(idx.begin(), count, cidx.begin());
      std::copy_n(abs.begin(), count, cabs.begin());
      const std::size_t c = sparsifiers::take_cut(cidx.data(), cabs.data(), count, grid, r, q);
      const std::int64_t g =
          dev::take_cut(ws, d_part, static_cast<std::int64_t>(n), offset, grid, r, q, d_out.data());
      const std::string where =
          str(ctx, " take_cut m=", grid.mant_bits, " R=", R, " lo_key=", grid.lo_key, " rung=", r,
              " quota=", q, " (bin holds ", in_bin, ", candidates ", count, ") offset=", offset);
      if (static_cast<std::int64_t>(c) != g) fail(str(where, ": count cpu ", c, ", gpu ", g));
      dev::copy_to_host(ws, gpu.data(), d_out.data(), c * sizeof(std::uint32_t));
      compare_vectors(cidx, gpu, c, where);
      ++g_checks;
      // take_cut_async on every third cut (the same kernels; the sanitizers' runs stay short).
      if (++g_cuts % 3 == 0)
        check_cut_async(ws, d_part, d_out, static_cast<std::int64_t>(n), offset, grid, r, q, cidx,
                        c, 0, where);
    }
    // A quota above the bin's count: refused on both.
    bool cpu_threw = false, gpu_threw = false;
    std::copy_n(idx.begin(), count, cidx.begin());
    std::copy_n(abs.begin(), count, cabs.begin());
    try {
      sparsifiers::take_cut(cidx.data(), cabs.data(), count, grid, r, in_bin + 1);
    } catch (const exdyna::InvalidArgument&) {
      cpu_threw = true;
    }
    try {
      dev::take_cut(ws, d_part, static_cast<std::int64_t>(n), offset, grid, r, in_bin + 1,
                    d_out.data());
    } catch (const exdyna::InvalidArgument&) {
      gpu_threw = true;
    }
    if (cpu_threw != gpu_threw)
      fail(str(ctx, " take_cut rung=", r, " quota=", in_bin + 1, " over the bin: cpu threw ",
               cpu_threw, ", gpu threw ", gpu_threw));
    ++g_checks;
    const std::string over = str(ctx, " take_cut rung=", r, " quota over the bin");
    check_cut_async(ws, d_part, d_out, static_cast<std::int64_t>(n), offset, grid, r, in_bin + 1,
                    cidx, 0, sparsifiers::rules::kCutQuotaBad, over);
  }
  // A rung past the ladder and a negative quota, which take_cut refuses by name.
  check_cut_async(ws, d_part, d_out, static_cast<std::int64_t>(n), offset, grid, R, 0, cidx, 0,
                  sparsifiers::rules::kCutRungBad, ctx + " take_cut past the top rung");
  check_cut_async(ws, d_part, d_out, static_cast<std::int64_t>(n), offset, grid, 0, -1, cidx, 0,
                  sparsifiers::rules::kCutRungBad, ctx + " take_cut quota -1");
}

void check_reductions(dev::Workspace& ws, const std::vector<float>& residual,
                      const std::vector<float>& grad, const std::string& ctx) {
  const std::size_t n = residual.size();
  dev::Buffer<float> d_r(n + 1), d_g(n + 1);
  for (const int shift : {0, 1}) {  // aligned, and one float off (the scalar path)
    if (shift == 1 && n < 2) continue;
    const std::size_t m = n - static_cast<std::size_t>(shift);
    std::vector<float> r(residual.begin() + shift, residual.end());
    std::vector<float> g(grad.begin() + shift, grad.end());
    dev::copy_to_device(ws, d_r.data() + shift, r.data(), m * sizeof(float));
    dev::copy_to_device(ws, d_g.data() + shift, g.data(), m * sizeof(float));
    const std::string where = str(ctx, shift ? " (misaligned)" : "");

    // max_abs (before the accumulate changes the residual)
    const float cpu_max = core::max_abs(r);
    const float gpu_max = dev::max_abs(ws, d_r.data() + shift, static_cast<std::int64_t>(m));
    if (bits(cpu_max) != bits(gpu_max))
      fail(str(where, " max_abs: cpu ", fstr(cpu_max), ", gpu ", fstr(gpu_max)));
    ++g_checks;

    // sum_squares: step_clip's norm (another summation order: equal to rounding)
    double cpu_sq = 0;
    for (const float v : r) cpu_sq += static_cast<double>(v) * v;
    const double gpu_sq = dev::sum_squares(ws, d_r.data() + shift, static_cast<std::int64_t>(m));
    const bool sq_close = std::isfinite(cpu_sq)
                              ? std::fabs(cpu_sq - gpu_sq) <= 1e-12 * cpu_sq + 1e-300
                              : std::isnan(cpu_sq) == std::isnan(gpu_sq) && !std::isfinite(gpu_sq);
    if (!sq_close) fail(str(where, " sum_squares: cpu ", cpu_sq, ", gpu ", gpu_sq));
    ++g_checks;

    for (const bool want_sq : {true, false}) {
      std::vector<float> cr = r;
      dev::copy_to_device(ws, d_r.data() + shift, r.data(), m * sizeof(float));
      const core::AccumulateResult ca = core::accumulate(cr, g);
      std::int64_t first_bad = -1;
      for (std::size_t i = 0; i < m; ++i)
        if (!std::isfinite(g[i]) || !std::isfinite(cr[i])) {
          first_bad = static_cast<std::int64_t>(i);
          break;
        }
      if ((first_bad < 0) != ca.finite)
        fail(str(where, " accumulate: the reference's first bad index ", first_bad,
                 " disagrees with core::accumulate's finite = ", ca.finite));
      const dev::AccumulateResult ga = dev::accumulate(ws, d_r.data() + shift, d_g.data() + shift,
                                                       static_cast<std::int64_t>(m), want_sq);
      if (ga.first_bad != first_bad)
        fail(str(where, " accumulate first_bad: cpu ", first_bad, ", gpu ", ga.first_bad));
      if (want_sq) {
        const double a = ca.residual_sq, b = ga.residual_sq;
        const bool same_class = std::isnan(a) == std::isnan(b) && std::isinf(a) == std::isinf(b);
        const bool close = !std::isfinite(a) || std::fabs(a - b) <= 1e-4 * std::fabs(a) + 1e-30;
        if (!same_class || !close)
          fail(str(where, " accumulate residual_sq: cpu ", a, ", gpu ", b));
      } else if (ga.residual_sq != 0) {
        fail(str(where, " accumulate residual_sq without want_sq: ", ga.residual_sq));
      }
      std::vector<float> gr(m);
      dev::copy_to_host(ws, gr.data(), d_r.data() + shift, m * sizeof(float));
      for (std::size_t i = 0; i < m; ++i)
        if (bits(cr[i]) != bits(gr[i]) && !(std::isnan(cr[i]) && std::isnan(gr[i])))
          fail(str(where, " accumulate acc[", i, "]: cpu ", fstr(cr[i]), ", gpu ", fstr(gr[i]),
                   " (residual ", fstr(r[i]), ", grad ", fstr(g[i]), ")"));
      ++g_checks;
    }
  }
}

void check_updates(dev::Workspace& ws, std::size_t n, std::mt19937_64& rng,
                   const std::string& ctx) {
  if (n == 0) return;
  // A selection: about 1 % of the indices (at least one), increasing, and the last one.
  std::vector<std::uint32_t> idx;
  std::bernoulli_distribution take(0.01);
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (take(rng)) idx.push_back(static_cast<std::uint32_t>(i));
  idx.push_back(static_cast<std::uint32_t>(n - 1));
  const std::size_t m = idx.size();
  const std::vector<float> x = gaussian(n, rng, 1.0f);
  const std::vector<float> sums = gaussian(m, rng, 3.0f);
  const std::vector<float> dense_sums = gaussian(n, rng, 3.0f);
  const float scale = 1.0f / 7.0f;

  dev::Buffer<float> d_x(n), d_grad(n), d_res(n), d_sums(std::max(n, m)), d_out(m);
  dev::Buffer<std::uint32_t> d_idx(m);
  dev::copy_to_device(ws, d_x.data(), x.data(), n * 4);
  dev::copy_to_device(ws, d_idx.data(), idx.data(), m * 4);

  // gather
  dev::gather(ws, d_x.data(), d_idx.data(), static_cast<std::int64_t>(m), d_out.data());
  std::vector<float> got(m);
  dev::copy_to_host(ws, got.data(), d_out.data(), m * 4);
  for (std::size_t j = 0; j < m; ++j)
    if (bits(got[j]) != bits(x[idx[j]]))
      fail(str(ctx, " gather[", j, "]: cpu ", fstr(x[idx[j]]), ", gpu ", fstr(got[j])));
  ++g_checks;

  // count_per_block on the layouts of 8 workers (1024 blocks, or the small-n fallbacks) and of
  // one worker with many blocks (the global-counter path).
  const std::pair<int, std::int64_t> layouts[] = {{8, 1024}, {1, 20000}, {1, 1}};
  for (const auto& [workers, nb] : layouts) {
    if (static_cast<std::int64_t>(n) < workers) continue;
    const sparsifiers::BlockLayout layout =
        sparsifiers::make_block_layout(static_cast<std::int64_t>(n), workers, nb);
    std::vector<std::uint32_t> cpu(static_cast<std::size_t>(layout.n_blocks), 5),
        gpu(static_cast<std::size_t>(layout.n_blocks), 5);
    layout.count_per_block(idx, cpu);
    dev::count_per_block(ws, d_idx.data(), static_cast<std::int64_t>(m), layout.block_size,
                         layout.n_blocks, gpu.data());
    compare_vectors(
        cpu, gpu, cpu.size(),
        str(ctx, " count_per_block n_b=", layout.n_blocks, " size=", layout.block_size));
    ++g_checks;
  }

  // scatter_update
  {
    std::vector<float> grad = gaussian(n, rng, 1.0f), res = gaussian(n, rng, 1.0f);
    dev::copy_to_device(ws, d_grad.data(), grad.data(), n * 4);
    dev::copy_to_device(ws, d_res.data(), res.data(), n * 4);
    dev::copy_to_device(ws, d_sums.data(), sums.data(), m * 4);
    dev::scatter_update(ws, d_grad.data(), d_res.data(), static_cast<std::int64_t>(n), d_idx.data(),
                        d_sums.data(), static_cast<std::int64_t>(m), scale);
    std::fill(grad.begin(), grad.end(), 0.0f);
    for (std::size_t j = 0; j < m; ++j) {
      grad[idx[j]] = sums[j] * scale;
      res[idx[j]] = 0.0f;
    }
    std::vector<float> gg(n), gr(n);
    dev::copy_to_host(ws, gg.data(), d_grad.data(), n * 4);
    dev::copy_to_host(ws, gr.data(), d_res.data(), n * 4);
    for (std::size_t i = 0; i < n; ++i)
      if (bits(gg[i]) != bits(grad[i]) || bits(gr[i]) != bits(res[i]))
        fail(str(ctx, " scatter_update [", i, "]: grad cpu ", fstr(grad[i]), " gpu ", fstr(gg[i]),
                 ", residual cpu ", fstr(res[i]), " gpu ", fstr(gr[i])));
    ++g_checks;
  }

  // dense_update, aligned and one float off
  for (const std::size_t shift : {std::size_t{0}, std::size_t{1}}) {
    if (shift >= n) continue;
    const std::size_t k = n - shift;
    std::vector<float> res = gaussian(k, rng, 1.0f), grad(k);
    dev::copy_to_device(ws, d_res.data() + shift, res.data(), k * 4);
    dev::copy_to_device(ws, d_sums.data() + shift, dense_sums.data(), k * 4);
    dev::dense_update(ws, d_grad.data() + shift, d_res.data() + shift, d_sums.data() + shift,
                      static_cast<std::int64_t>(k), scale);
    std::vector<float> gg(k), gr(k);
    dev::copy_to_host(ws, gg.data(), d_grad.data() + shift, k * 4);
    dev::copy_to_host(ws, gr.data(), d_res.data() + shift, k * 4);
    for (std::size_t i = 0; i < k; ++i)
      if (bits(gg[i]) != bits(dense_sums[i] * scale) || bits(gr[i]) != 0)
        fail(str(ctx, " dense_update [", i, "] shift ", shift, ": grad cpu ",
                 fstr(dense_sums[i] * scale), " gpu ", fstr(gg[i]), ", residual gpu ",
                 fstr(gr[i])));
    ++g_checks;
  }
}

// plan_counts (the plan on the device) against decode_ladder, plan_worker_counts and own_cut on the
// same gathered slots: random ladders of 1 to 200 workers (some empty), 17 to 257 rungs, slots
// that hold every rung and slots that drop the lowest, caps that bind and caps that yield, k up to
// more than the ladders hold; the slots spaced as the fused all-gather spaces them (other words
// between, filled with noise); then one slot the CPU refuses.
void check_plans(dev::Workspace& ws, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> noise;
  int plans = 0;
  for (const int workers : {1, 3, 4, 16, 33, 200}) {
    for (const int rungs : {17, 129, 257}) {
      for (const std::size_t ladder_words : {std::size_t{4}, std::size_t{40}}) {
        const std::size_t stride = ladder_words + 3;
        const auto nw = static_cast<std::size_t>(workers), r = static_cast<std::size_t>(rungs);
        std::vector<std::int64_t> full(nw * r, 0), slots(nw * stride), gathered(nw * (1 + r));
        std::uniform_int_distribution<int> rung(0, rungs - 1);
        std::uniform_int_distribution<std::int64_t> count(0, 5000);
        for (std::size_t w = 0; w < nw; ++w) {
          std::int64_t held = 0;
          if (rng() % 7 != 0) {  // about one worker in seven empty
            int lo = rung(rng), hi = rung(rng);
            if (lo > hi) std::swap(lo, hi);
            for (int j = lo; j <= hi; ++j)
              if (rng() % 3 != 0) held += full[w * r + static_cast<std::size_t>(j)] = count(rng);
          }
          for (std::size_t i = 0; i < stride; ++i) slots[w * stride + i] = noise(rng);
          const std::span<std::int64_t> slot(slots.data() + w * stride, ladder_words);
          sparsifiers::encode_ladder(held, std::span<const std::int64_t>(&full[w * r], r), slot);
          sparsifiers::decode_ladder(slot, gathered[w * (1 + r)],
                                     std::span<std::int64_t>(&gathered[w * (1 + r) + 1], r));
        }
        std::int64_t all = 0;
        for (std::size_t w = 0; w < nw; ++w)
          for (std::size_t j = 0; j < r; ++j) all += gathered[w * (1 + r) + 1 + j];
        dev::Buffer<std::int64_t> d_slots(slots.size()), d_own(r),
            d_out(dev::plan_out_words(workers));
        dev::copy_to_device(ws, d_slots.data(), slots.data(), slots.size() * 8);
        for (const std::int64_t k : {std::int64_t{1}, std::max<std::int64_t>(1, all / 50),
                                     std::max<std::int64_t>(1, all / 2), all + 9}) {
          for (const std::int64_t cap : {std::int64_t{0}, k / workers + 1, k / (4 * workers) + 1}) {
            const int rank = static_cast<int>(rng() % nw);
            std::vector<std::int64_t> cpu(nw), scratch(3 * nw);
            const std::int64_t total = sparsifiers::plan_worker_counts(gathered, workers, 1 + r, 1,
                                                                       rungs, k, cap, cpu, scratch);
            const std::span<const std::int64_t> own(&full[static_cast<std::size_t>(rank) * r], r);
            const auto [cut_rung, quota] = sparsifiers::own_cut(own, cpu[rank]);
            dev::copy_to_device(ws, d_own.data(), own.data(), r * 8);
            dev::PlanShape shape;
            shape.workers = workers;
            shape.rungs = rungs;
            shape.slot_stride = stride;
            shape.ladder_words = ladder_words;
            shape.k = k;
            shape.cap = cap;
            shape.rank = rank;
            dev::plan_counts(ws, d_slots.data(), shape, d_own.data(), d_out.data());
            std::vector<std::int64_t> got(dev::plan_out_words(workers));
            dev::copy_to_host(ws, got.data(), d_out.data(), got.size() * 8);
            const std::string ctx = str("plan: workers ", workers, " rungs ", rungs, " words ",
                                        ladder_words, " k ", k, " cap ", cap, " rank ", rank);
            if (got[nw + 3] != 0) fail(str(ctx, ": status ", got[nw + 3], " at ", got[nw + 4]));
            for (std::size_t w = 0; w < nw; ++w)
              if (got[w] != cpu[w])
                fail(str(ctx, ": worker ", w, " count cpu ", cpu[w], " gpu ", got[w]));
            if (got[nw] != total || got[nw + 1] != cut_rung || got[nw + 2] != quota)
              fail(str(ctx, ": total/rung/quota cpu ", total, "/", cut_rung, "/", quota, " gpu ",
                       got[nw], "/", got[nw + 1], "/", got[nw + 2]));
            // Without the worker's own ladder: the cut of its decoded one.
            dev::plan_counts(ws, d_slots.data(), shape, nullptr, d_out.data());
            dev::copy_to_host(ws, got.data(), d_out.data(), got.size() * 8);
            const auto [dec_rung, dec_quota] = sparsifiers::own_cut(
                std::span<const std::int64_t>(
                    &gathered[static_cast<std::size_t>(rank) * (1 + r) + 1], r),
                cpu[rank]);
            if (got[nw + 3] != 0 || got[nw + 1] != dec_rung || got[nw + 2] != dec_quota)
              fail(str(ctx, " (decoded own ladder): status ", got[nw + 3], " rung/quota cpu ",
                       dec_rung, "/", dec_quota, " gpu ", got[nw + 1], "/", got[nw + 2]));
            g_checks += 2;
            ++plans;
          }
        }
        // A slot decode_ladder refuses (bytes 0xff only: a number past 64 bits) at the last
        // worker.
        std::vector<std::int64_t> bad = slots;
        std::fill_n(bad.begin() + static_cast<std::ptrdiff_t>((nw - 1) * stride), ladder_words, -1);
        dev::copy_to_device(ws, d_slots.data(), bad.data(), bad.size() * 8);
        dev::PlanShape shape;
        shape.workers = workers;
        shape.rungs = rungs;
        shape.slot_stride = stride;
        shape.ladder_words = ladder_words;
        shape.k = 1;
        dev::plan_counts(ws, d_slots.data(), shape, d_own.data(), d_out.data());
        std::vector<std::int64_t> got(dev::plan_out_words(workers));
        dev::copy_to_host(ws, got.data(), d_out.data(), got.size() * 8);
        if (got[nw + 3] != sparsifiers::rules::kSlotNumberTooWide ||
            got[nw + 4] != static_cast<std::int64_t>(nw - 1))
          fail(str("plan of a bad slot: status ", got[nw + 3], " at ", got[nw + 4], "; expected ",
                   static_cast<int>(sparsifiers::rules::kSlotNumberTooWide), " at ", nw - 1));
        ++g_checks;
      }
    }
  }
  std::printf("  plan_counts ok (%d plans, %ld checks so far)\n", plans, g_checks);
  std::fflush(stdout);
}

// encode_slot and unpack_lists (the wire on the device) against encode_ladder and ExDyna's unpack
// of the fused slots (unpack_fused per rank, a rank with count 0 its one index) on the same data:
// slots of 1 to 64 words (some too small for the count, some dropping rungs); 1 to 200 ranks with
// lists of up to the cap (1, 300 and 70,000: places of 2 and 4 bytes), counts from 0 to the whole
// list, noise between the slots; then a count above its list (the cap yielded: the whole list is
// taken) and a slot whose places are corrupt.
void check_wire(dev::Workspace& ws, std::mt19937_64& rng) {
  int slots_checked = 0, lists_checked = 0;
  dev::Buffer<std::int64_t> d_count(1), d_bins(257), d_slot(64), d_result(4);
  for (const int rungs : {17, 129, 257}) {
    for (const std::size_t words : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
      for (int rep = 0; rep < 10; ++rep) {
        std::vector<std::int64_t> bins(static_cast<std::size_t>(rungs), 0);
        for (auto& b : bins)
          if (rng() % 3 == 0) b = static_cast<std::int64_t>(rng() % (rep % 2 ? 1000 : 1u << 30));
        const std::int64_t count = rep == 9 ? std::numeric_limits<std::int64_t>::max()
                                            : static_cast<std::int64_t>(rng() % 100000);
        std::vector<std::int64_t> cpu(words, 0), got(words, 0), result(2, -1);
        int lowest = -1;
        bool refused = false;
        try {
          lowest = sparsifiers::encode_ladder(count, bins, cpu);
        } catch (const exdyna::InvalidArgument&) {
          refused = true;
        }
        dev::copy_to_device(ws, d_count.data(), &count, 8);
        dev::copy_to_device(ws, d_bins.data(), bins.data(), bins.size() * 8);
        dev::encode_slot(ws, d_count.data(), d_bins.data(), rungs, d_slot.data(), words,
                         d_result.data());
        dev::copy_to_host(ws, got.data(), d_slot.data(), words * 8);
        dev::copy_to_host(ws, result.data(), d_result.data(), 16);
        const std::string ctx =
            str("encode_slot: rungs ", rungs, " words ", words, " count ", count);
        if (refused) {
          if (result[0] != sparsifiers::rules::kSlotTooSmall)
            fail(str(ctx, ": the CPU refused, the device gave status ", result[0]));
        } else if (result[0] != 0 || result[1] != lowest || got != cpu) {
          fail(str(ctx, ": status ", result[0], " lowest cpu ", lowest, " gpu ", result[1],
                   got != cpu ? " and the slots differ" : ""));
        }
        ++g_checks;
        ++slots_checked;
      }
    }
  }
  for (const std::int64_t cap : {std::int64_t{1}, std::int64_t{300}, std::int64_t{70000}}) {
    for (const int workers : {1, 4, 200}) {
      if (cap == 70000 && workers == 200) continue;  // 200 slots of 70,000: more than is useful
      sparsifiers::FusedLayout layout;
      layout.head_words = 3;
      layout.cap = cap;
      const std::size_t stride = layout.slot_words() + 2;
      const auto nw = static_cast<std::size_t>(workers);
      std::vector<std::int64_t> slots(nw * stride), counts(nw);
      std::vector<std::uint32_t> one(nw), expect;
      std::vector<std::uint64_t> scratch;
      for (std::size_t j = 0; j < nw; ++j) {
        for (std::size_t i = 0; i < stride; ++i)
          slots[j * stride + i] = static_cast<std::int64_t>(rng());
        const auto list = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(cap + 1));
        std::vector<std::uint32_t> kept(list), keys(list);
        std::uint32_t at = static_cast<std::uint32_t>(rng() % 1000);
        for (std::size_t i = 0; i < list; ++i) {
          at += 1 + static_cast<std::uint32_t>(rng() % 50);
          kept[i] = at;
          keys[i] = static_cast<std::uint32_t>(rng() % 40);
        }
        const std::span<std::int64_t> slot(slots.data() + j * stride, layout.slot_words());
        sparsifiers::pack_fused(kept, keys, layout, slot, scratch);
        counts[j] = list == 0 || rng() % 5 == 0 ? 0 : 1 + static_cast<std::int64_t>(rng() % list);
        one[j] = static_cast<std::uint32_t>(rng());
        if (counts[j] == 0)
          expect.push_back(one[j]);
        else
          sparsifiers::unpack_fused(slot, layout, counts[j], expect);
      }
      const std::int64_t total = static_cast<std::int64_t>(expect.size());
      const std::int64_t k = total + cap + 17;  // room for a whole list where the cap yields
      expect.resize(static_cast<std::size_t>(k), 0xfffffff0u);
      dev::Buffer<std::int64_t> d_slots(slots.size()), d_counts(nw);
      dev::Buffer<std::uint32_t> d_one(nw), d_idx(static_cast<std::size_t>(k));
      dev::copy_to_device(ws, d_slots.data(), slots.data(), slots.size() * 8);
      dev::copy_to_device(ws, d_counts.data(), counts.data(), nw * 8);
      dev::copy_to_device(ws, d_one.data(), one.data(), nw * 4);
      dev::UnpackShape shape;
      shape.workers = workers;
      shape.slot_stride = stride;
      shape.head_words = layout.head_words;
      shape.cap = cap;
      shape.k = k;
      shape.sentinel = 0xfffffff0u;
      std::vector<std::int64_t> result(4, -9);
      std::vector<std::uint32_t> got(static_cast<std::size_t>(k));
      dev::unpack_lists(ws, d_slots.data(), shape, d_counts.data(), d_one.data(), d_idx.data(),
                        d_result.data());
      dev::copy_to_host(ws, got.data(), d_idx.data(), got.size() * 4);
      dev::copy_to_host(ws, result.data(), d_result.data(), 32);
      const std::string ctx = str("unpack_lists: cap ", cap, " workers ", workers);
      if (result[0] != total || result[1] != 0 || result[2] != -1 || result[3] != 0)
        fail(str(ctx, ": result ", result[0], " (cpu ", total, ") status ", result[1], " at ",
                 result[2], " short ", result[3]));
      compare_vectors(expect, got, got.size(), ctx);
      ++g_checks;
      // The cap yielded for the last rank: its count above its list takes the whole list.
      std::vector<std::uint32_t> whole = expect;
      whole.resize(static_cast<std::size_t>(total) -
                   static_cast<std::size_t>(counts.back() == 0 ? 1 : counts.back()));
      const std::span<const std::int64_t> last(slots.data() + (nw - 1) * stride,
                                               layout.slot_words());
      const std::int64_t held = sparsifiers::fused_count(last, layout);
      if (held == 0)
        whole.push_back(one.back());
      else
        sparsifiers::unpack_fused(last, layout, held, whole);
      const auto listed = static_cast<std::int64_t>(whole.size());
      whole.resize(static_cast<std::size_t>(k), 0xfffffff0u);
      std::vector<std::int64_t> yielded = counts;
      yielded.back() = cap + 1;
      dev::copy_to_device(ws, d_counts.data(), yielded.data(), nw * 8);
      dev::unpack_lists(ws, d_slots.data(), shape, d_counts.data(), d_one.data(), d_idx.data(),
                        d_result.data());
      dev::copy_to_host(ws, got.data(), d_idx.data(), got.size() * 4);
      dev::copy_to_host(ws, result.data(), d_result.data(), 32);
      if (result[0] != listed || result[1] != sparsifiers::rules::kFusedCapYielded ||
          result[2] != -1)
        fail(str(ctx, " (cap yielded): result ", result[0], " (cpu ", listed, ") status ",
                 result[1], " at ", result[2]));
      compare_vectors(whole, got, got.size(), ctx + " (cap yielded)");
      // The first rank with a count places every entry past it (place bytes all 0xff).
      if (counts[0] > 0) {
        std::vector<std::int64_t> bad = slots;
        const std::size_t places = layout.head_words + 1 + layout.index_words();
        for (std::size_t i = places; i < layout.slot_words(); ++i) bad[i] = -1;
        dev::copy_to_device(ws, d_slots.data(), bad.data(), bad.size() * 8);
        dev::copy_to_device(ws, d_counts.data(), counts.data(), nw * 8);
        dev::unpack_lists(ws, d_slots.data(), shape, d_counts.data(), d_one.data(), d_idx.data(),
                          d_result.data());
        dev::copy_to_host(ws, result.data(), d_result.data(), 32);
        if (result[3] != 1) fail(str(ctx, " (bad places): short ", result[3], "; expected 1"));
      }
      g_checks += 2;
      ++lists_checked;
    }
  }
  std::printf("  encode_slot, unpack_lists ok (%d slots, %d lists, %ld checks so far)\n",
              slots_checked, lists_checked, g_checks);
  std::fflush(stdout);
}

// pack_slot (this worker's fused slot on the device) against the CPU's: collect_ladder_candidates
// from the floor, own_cut and take_cut of L = min(count, cap), cut_order_key, encode_ladder and
// pack_fused, word for word; partitions inside a larger acc (an offset), floors 0 and 5, caps from
// 1 to past 65,536 (4-byte places), a partition with no candidate.
void check_pack(dev::Workspace& ws, std::mt19937_64& rng) {
  int packs = 0;
  for (const std::size_t n : {std::size_t{1000}, (std::size_t{1} << 20) + 7}) {
    std::vector<float> acc = gaussian(n + 300, rng, 1e-2f);
    for (std::size_t i = 0; i < 300; ++i) acc[n + i] = 5.0f;  // past the partition: never read
    const std::uint32_t offset = 0;
    const std::span<const float> part(acc.data(), n);
    std::vector<float> sa(part.begin(), part.end());
    for (auto& v : sa) v = std::fabs(v);
    std::sort(sa.begin(), sa.end(), std::greater<>());
    dev::Buffer<float> d_acc(acc.size());
    dev::copy_to_device(ws, d_acc.data(), acc.data(), acc.size() * 4);
    sparsifiers::LadderGrid grid = grids_of(sa).front().second;  // m4x129 around the 1 % value
    for (const int floor : {0, 5}) {
      sparsifiers::LadderGrid fg = grid;
      fg.lo_key += static_cast<std::uint32_t>(floor);
      fg.rungs -= floor;
      for (const std::int64_t cap :
           {std::int64_t{1}, std::int64_t{37}, std::int64_t{5000}, std::int64_t{70000}}) {
        for (const bool empty : {false, true}) {
          sparsifiers::LadderGrid g = fg;
          if (empty) g.lo_key = sparsifiers::ladder_key(1e30f, g.mant_bits);  // nothing that high
          sparsifiers::FusedLayout layout;
          layout.head_words = 25;  // 24 ladder words and a timing word
          layout.cap = cap;
          // The CPU's slot.
          std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
          std::vector<std::uint32_t> idx(n + 1);
          std::vector<float> abs(n + 1);
          const std::size_t count = sparsifiers::collect_ladder_candidates(
              part, offset, g, idx.data(), abs.data(), bins.data() + floor);
          const std::int64_t list = std::min<std::int64_t>(static_cast<std::int64_t>(count), cap);
          std::size_t kept = 0;
          if (list > 0) {
            const auto [cut, quota] = sparsifiers::own_cut(bins, list);
            kept = sparsifiers::take_cut(idx.data(), abs.data(), count, g, std::max(cut - floor, 0),
                                         quota);
          }
          std::vector<std::uint32_t> keys(kept);
          for (std::size_t i = 0; i < kept; ++i)
            keys[i] = sparsifiers::cut_order_key(std::fabs(acc[idx[i]]), g);
          std::vector<std::int64_t> cpu(layout.slot_words(), 0);
          const int lowest = sparsifiers::encode_ladder(static_cast<std::int64_t>(count), bins,
                                                        std::span<std::int64_t>(cpu).first(24));
          std::vector<std::uint64_t> scratch;
          sparsifiers::pack_fused(std::span<const std::uint32_t>(idx.data(), kept), keys, layout,
                                  cpu, scratch);
          // The device's.
          dev::Buffer<std::int64_t> d_slot(layout.slot_words()), d_result(7);
          dev::PackShape shape;
          shape.len = static_cast<std::int64_t>(n);
          shape.offset = offset;
          shape.floor_grid = g;
          shape.floor = floor;
          shape.rungs = grid.rungs;
          shape.ladder_words = 24;
          shape.head_words = 25;
          shape.cap = cap;
          dev::pack_slot(ws, d_acc.data(), shape, d_slot.data(), d_result.data());
          std::vector<std::int64_t> got(layout.slot_words()), result(7);
          dev::copy_to_host(ws, got.data(), d_slot.data(), got.size() * 8);
          dev::copy_to_host(ws, result.data(), d_result.data(), 56);
          const std::string ctx = str("pack_slot: n ", n, " floor ", floor, " cap ", cap,
                                      empty ? " (no candidate)" : "");
          if (result[0] != static_cast<std::int64_t>(count) || result[1] != list ||
              result[2] != 0 || result[3] != 0 || result[4] != 0 || result[5] != lowest ||
              result[6] != 0)
            fail(str(ctx, ": result ", result[0], "/", result[1], " status ", result[2], "/",
                     result[3], "/", result[4], " lowest ", result[5], "/", lowest, " kept ",
                     result[6], "; cpu count ", count, " L ", list));
          compare_vectors(cpu, got, cpu.size(), ctx + " slot words");
          ++g_checks;
          ++packs;
        }
      }
    }
  }
  std::printf("  pack_slot ok (%d slots, %ld checks so far)\n", packs, g_checks);
  std::fflush(stdout);
}

// A resident step's list (indices, then padding at n): gather_listed reads 0 at the padding,
// scatter_update skips it, count_per_block_async counts only the indices, against the CPU.
void check_listed(dev::Workspace& ws, std::mt19937_64& rng) {
  const std::int64_t n = 100'003;
  std::vector<float> x = gaussian(static_cast<std::size_t>(n), rng, 1.0f);
  std::vector<std::uint32_t> list;
  for (std::uint32_t i = 0; i < n; i += 1 + static_cast<std::uint32_t>(rng() % 97))
    list.push_back(i);
  const std::size_t listed = list.size();
  list.resize(listed + 333, static_cast<std::uint32_t>(n));
  const auto m = static_cast<std::int64_t>(list.size());
  dev::Buffer<float> d_x(static_cast<std::size_t>(n)), d_out(list.size()),
      d_grad(static_cast<std::size_t>(n)), d_res(static_cast<std::size_t>(n));
  const sparsifiers::BlockLayout layout = sparsifiers::make_block_layout(n, 4, 64);
  dev::Buffer<std::uint32_t> d_list(list.size()), d_hits(static_cast<std::size_t>(layout.n_blocks));
  dev::copy_to_device(ws, d_x.data(), x.data(), x.size() * 4);
  dev::copy_to_device(ws, d_list.data(), list.data(), list.size() * 4);
  dev::gather_listed(ws, d_x.data(), n, d_list.data(), m, d_out.data());
  std::vector<float> got(list.size());
  dev::copy_to_host(ws, got.data(), d_out.data(), got.size() * 4);
  for (std::size_t j = 0; j < list.size(); ++j) {
    const float want = j < listed ? x[list[j]] : 0.0f;
    if (bits(got[j]) != bits(want))
      fail(str("gather_listed [", j, "]: cpu ", fstr(want), " gpu ", fstr(got[j])));
  }
  // The update: grad 0 but at the indices, the residual 0 there, the padding touching nothing.
  dev::copy_to_device(ws, d_res.data(), x.data(), x.size() * 4);
  dev::scatter_update(ws, d_grad.data(), d_res.data(), n, d_list.data(), d_out.data(), m, 0.25f);
  std::vector<float> grad(x.size()), res(x.size());
  dev::copy_to_host(ws, grad.data(), d_grad.data(), grad.size() * 4);
  dev::copy_to_host(ws, res.data(), d_res.data(), res.size() * 4);
  std::vector<float> want_g(x.size(), 0.0f), want_r = x;
  for (std::size_t j = 0; j < listed; ++j) {
    want_g[list[j]] = x[list[j]] * 0.25f;
    want_r[list[j]] = 0.0f;
  }
  compare_vectors(want_g, grad, grad.size(), "scatter_update over a padded list: grad");
  compare_vectors(want_r, res, res.size(), "scatter_update over a padded list: residual");
  // Per-block counts of the indices only.
  std::vector<std::uint32_t> cpu(static_cast<std::size_t>(layout.n_blocks), 0), gpu(cpu.size(), 7);
  layout.count_per_block(std::span<const std::uint32_t>(list.data(), listed), cpu);
  dev::count_per_block_async(ws, d_list.data(), m, n, layout.block_size, layout.n_blocks,
                             d_hits.data());
  dev::copy_to_host(ws, gpu.data(), d_hits.data(), gpu.size() * 4);
  compare_vectors(cpu, gpu, cpu.size(), "count_per_block_async over a padded list");
  g_checks += 4;
  std::printf("  gather_listed, scatter_update, count_per_block_async over a padded list ok\n");
  std::fflush(stdout);
}

void run_size(dev::Workspace& ws, std::size_t n, std::mt19937_64& rng) {
  const bool big = n > (std::size_t{1} << 22);
  std::printf("n = %zu\n", n);
  std::fflush(stdout);
  dev::Buffer<float> d_x(n + 4);
  dev::Buffer<std::uint32_t> d_out(n + 4);
  for (const Input& in : inputs_of(n, rng, !big)) {
    const std::string ctx = str("n=", n, " ", in.name);
    const std::vector<float> sa = sorted_abs(in.x);
    // The partition at an aligned pointer and (small inputs) at one float off.
    for (const std::size_t shift : {std::size_t{0}, std::size_t{1}}) {
      if (shift == 1 && big) continue;
      dev::copy_to_device(ws, d_x.data() + shift, in.x.data(), n * sizeof(float));
      const float* d_part = d_x.data() + shift;
      const std::string c2 = shift ? ctx + " (misaligned)" : ctx;
      const std::vector<std::uint32_t> offsets =
          big ? std::vector<std::uint32_t>{0u, 3'000'000u}
              : std::vector<std::uint32_t>{0u, 123'456'789u,
                                           0xffffffffu - static_cast<std::uint32_t>(n / 2)};
      for (const float thr : thresholds_of(sa))
        for (const std::uint32_t off : offsets) check_select(ws, in.x, d_part, d_out, thr, off, c2);
      for (const auto& [gname, grid] : grids_of(sa)) {
        check_ladder(ws, in.x, d_part, grid, c2 + " " + gname);
        if (big && gname != "m4x129" && gname != "cold129" && gname != "m2x33") continue;
        check_cuts(ws, in.x, d_part, d_out, grid, offsets[shift == 0 ? offsets.size() - 1 : 0],
                   !big, c2 + " " + gname);
      }
    }
    std::printf("  %-20s ok (%ld checks so far)\n", in.name.c_str(), g_checks);
    std::fflush(stdout);
  }
  // The reductions on a residual and a gradient (with specials in one of them).
  {
    std::vector<float> r = gaussian(n, rng, 1e-2f), g = gaussian(n, rng, 1e-3f);
    check_reductions(ws, r, g, str("n=", n, " finite"));
    if (!big) {
      add_specials(g, rng);
      check_reductions(ws, r, g, str("n=", n, " grad with specials"));
      std::vector<float> r2 = gaussian(n, rng, 1.0f);
      add_specials(r2, rng);
      check_reductions(ws, r2, gaussian(n, rng, 1.0f), str("n=", n, " residual with specials"));
    }
  }
  check_updates(ws, n, rng, str("n=", n));
  std::printf("  reductions, updates ok (%ld checks so far)\n", g_checks);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: exdyna_cuda_check [--quick]\n"
          "Compares every device kernel (core/, sparsifiers/exdyna/) with its CPU counterpart on "
          "random\n"
          "and adversarial inputs. Exit 0: all equal; 1: a mismatch (printed); 77: no CUDA\n"
          "device; 2: bad arguments. --quick leaves out the 25M-element inputs.\n");
      return 0;
    }
    if (a == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "exdyna_cuda_check: unknown argument %s (try --help)\n", a.c_str());
      return 2;
    }
  }
  if (!dev::available()) {
    std::printf("exdyna_cuda_check: no CUDA device: skipped (exit 77)\n");
    return 77;
  }
  try {
    dev::Workspace ws;
    std::mt19937_64 rng(20240611);
    std::vector<std::size_t> sizes = {1, 31, 1000, (std::size_t{1} << 20) + 7};
    if (!quick) sizes.push_back(25'000'000);
    check_plans(ws, rng);
    check_wire(ws, rng);
    check_pack(ws, rng);
    check_listed(ws, rng);
    for (const std::size_t n : sizes) run_size(ws, n, rng);
    // Empty inputs: nothing selected, nothing counted, nothing written.
    {
      std::vector<std::int64_t> bins(33, 7);
      sparsifiers::LadderGrid grid;
      dev::Buffer<std::uint32_t> out(1);
      if (dev::select_threshold(ws, nullptr, 0, 0.0f, 0, out.data()) != 0 ||
          dev::ladder_count(ws, nullptr, 0, grid, bins.data()) != 0 ||
          dev::take_cut(ws, nullptr, 0, 0, grid, 3, 0, out.data()) != 0 ||
          dev::max_abs(ws, nullptr, 0) != 0.0f || dev::sum_squares(ws, nullptr, 0) != 0.0 ||
          dev::accumulate(ws, nullptr, nullptr, 0, true).first_bad != -1)
        fail("empty inputs");
      for (auto b : bins)
        if (b != 7) fail("ladder_count on an empty partition changed the bins");
      ++g_checks;
    }
    // Grids the CPU refuses are refused alike.
    {
      sparsifiers::LadderGrid bad;
      bad.rungs = 258;
      std::vector<std::int64_t> bins(258);
      dev::Buffer<float> x(4);
      bool threw = false;
      try {
        dev::ladder_count(ws, x.data(), 4, bad, bins.data());
      } catch (const exdyna::InvalidArgument&) {
        threw = true;
      }
      if (!threw) fail("ladder_count accepted a ladder of 258 rungs");
      ++g_checks;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exdyna_cuda_check: error: %s\n", e.what());
    return 1;
  }
  std::printf("exdyna_cuda_check: all %ld checks passed\n", g_checks);
  return 0;
}
