#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "exdyna/core/error.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace exdyna::sparsifiers {

LadderCut cut_ladder(std::span<const std::int64_t> summed, std::int64_t k) {
  EXDYNA_CHECK_ARG(!summed.empty(), "ladder cut of an empty ladder; expected at least one bin");
  EXDYNA_CHECK_ARG(k >= 1, "ladder cut for k = ", k, "; expected k >= 1");
  LadderCut cut;
  std::int64_t above = 0;  // count at or above rung j + 1
  for (int j = static_cast<int>(summed.size()) - 1; j >= 0; --j) {
    EXDYNA_CHECK_ARG(summed[j] >= 0, "ladder bin ", j, " holds ", summed[j],
                     "; expected a count >= 0");
    if (above + summed[j] >= k) {
      cut.rung = j;
      cut.need = k - above;
      cut.total = k;
      cut.bracketed = true;
      return cut;
    }
    above += summed[j];
  }
  // Fewer than k candidates in all: take them all.
  cut.rung = 0;
  cut.need = summed[0];
  cut.total = above;
  return cut;
}

LadderGrid cold_ladder(float max_abs, int rungs) {
  EXDYNA_CHECK_ARG(rungs >= 1, "cold ladder of ", rungs, " rungs; expected at least 1");
  LadderGrid g;
  g.mant_bits = 0;
  g.rungs = rungs;
  const std::uint32_t top = ladder_key(max_abs, 0);  // the max's octave is the top rung
  const auto below = static_cast<std::uint32_t>(rungs - 1);
  g.lo_key = top > below ? top - below : 0;
  return g;
}

double cut_value(const LadderGrid& grid, std::span<const std::int64_t> summed,
                 const LadderCut& cut) {
  const double lo = grid.value(cut.rung), hi = grid.value(cut.rung + 1);
  const auto in_bin = cut.rung < static_cast<int>(summed.size()) ? summed[cut.rung] : 0;
  if (!cut.bracketed || in_bin <= 0 || !(lo > 0)) return lo;
  // need of in_bin values are taken from the top of [lo, hi): even in log, the cut sits at
  // lo * (hi / lo)^(1 - need / in_bin).
  const double frac = 1.0 - static_cast<double>(cut.need) / static_cast<double>(in_bin);
  return lo * std::pow(hi / lo, frac);
}

void apportion(std::int64_t need, std::span<const std::int64_t> have,
               std::span<std::int64_t> share) {
  EXDYNA_CHECK_ARG(share.size() == have.size(), "apportion into ", share.size(), " shares for ",
                   have.size(), " workers; expected equal sizes");
  std::int64_t total = 0;
  for (const auto h : have) {
    EXDYNA_CHECK_ARG(h >= 0, "apportion: a worker holds ", h, "; expected >= 0");
    total += h;
  }
  EXDYNA_CHECK_ARG(need >= 0 && need <= total, "apportion ", need, " of ", total,
                   "; expected 0 <= need <= total");
  if (need == 0 || total == 0) {
    std::fill(share.begin(), share.end(), 0);
    return;
  }
  // floor(need * have / total) exactly (64-bit products where they fit, else 128-bit), then one
  // more to the largest remainders (ties to the lower index) until the shares add up to need.
  // Each floor and remainder is computed once: a search one share at a time would redo two
  // 128-bit divisions per worker and step, about 2 w^2 library calls, which at 16 workers cost as
  // much as the whole selection pass of a small partition.
  constexpr std::size_t kStackWorkers = 64;
  std::array<std::int64_t, kStackWorkers> rem_stack{};
  std::vector<std::int64_t> rem_heap;
  std::int64_t* rem = rem_stack.data();
  if (have.size() > kStackWorkers) {
    rem_heap.resize(have.size());
    rem = rem_heap.data();
  }
  std::int64_t given = 0;
  for (std::size_t w = 0; w < have.size(); ++w) {
    std::int64_t p64 = 0;
    if (!__builtin_mul_overflow(need, have[w], &p64)) {
      share[w] = p64 / total;
      rem[w] = p64 % total;
    } else {
      const auto p = static_cast<unsigned __int128>(need) * static_cast<unsigned __int128>(have[w]);
      share[w] = static_cast<std::int64_t>(p / static_cast<unsigned __int128>(total));
      rem[w] = static_cast<std::int64_t>(p % static_cast<unsigned __int128>(total));
    }
    given += share[w];
  }
  for (std::int64_t left = need - given; left > 0; --left) {
    std::size_t best = have.size();
    std::int64_t best_r = 0;
    for (std::size_t w = 0; w < have.size(); ++w) {
      if (rem[w] > best_r) {
        best = w;
        best_r = rem[w];
      }
    }
    EXDYNA_CHECK(best < have.size(), "apportion found no remainder for ", left, " of ", need);
    ++share[best];
    rem[best] = 0;  // raised once: out of the search, as a worker with no remainder
  }
}

namespace {

// The sum of p[0, n), a worker's bins above the plan's start rung: 40-100 rungs each at 16
// workers, half of the plan's time with the baseline build's two-wide adds; eight at a time
// here.
#if defined(__SSE2__)
// (GCC's reduction intrinsic builds on an "undefined" vector and then warns about it.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) std::int64_t sum_bins_avx512(const std::int64_t* p,
                                                                std::size_t n) {
  __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 8));
  }
  if (i + 8 <= n) {
    a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
    i += 8;
  }
  a = _mm512_add_epi64(a,
                       _mm512_maskz_loadu_epi64(static_cast<__mmask8>((1u << (n - i)) - 1), p + i));
  return _mm512_reduce_add_epi64(_mm512_add_epi64(a, b));
}
#pragma GCC diagnostic pop
#endif

std::int64_t sum_bins(const std::int64_t* p, std::size_t n) {
#if defined(__SSE2__)
  static const bool avx512 = select_kernel_available(SelectKernel::kAvx512);
  if (avx512) return sum_bins_avx512(p, n);
#endif
  std::int64_t a = 0;
  for (std::size_t i = 0; i < n; ++i) a += p[i];
  return a;
}

// The highest rung at which the uncapped global count (from the top) reaches k, or 0. The capped
// count is never larger (bins are counts, >= 0), so a plan for target k never stops above it: the
// plan starts there instead of walking the ladder's empty top (7.75 octaves, ~124 rungs, w workers
// each).
int first_possible_rung(std::span<const std::int64_t> ladders, int workers, std::size_t stride,
                        std::size_t offset, int rungs, std::int64_t k,
                        std::span<const std::int64_t> given, int* top) {
  constexpr int kMaxRungs = 257;
  std::array<std::int64_t, kMaxRungs> own;
  const std::int64_t* summed = given.data();
  if (given.size() != static_cast<std::size_t>(rungs)) {
    *top = rungs - 1;
    if (rungs > kMaxRungs) return rungs - 1;
    std::fill_n(own.begin(), rungs, 0);
    for (int w = 0; w < workers; ++w) {
      const std::int64_t* b = ladders.data() + static_cast<std::size_t>(w) * stride + offset;
      for (int j = 0; j < rungs; ++j) own[static_cast<std::size_t>(j)] += b[j];
    }
    summed = own.data();
  }
  std::int64_t total = 0;
  *top = rungs - 1;
  for (int j = rungs - 1; j > 0; --j) {
    total += summed[static_cast<std::size_t>(j)];
    if (total == 0) *top = j - 1;  // every ladder is empty at rung j and above
    if (total >= k) return j;
  }
  return 0;
}

// One pass of the plan for a target `k`, from rung `start` down; returns the total.
std::int64_t plan_once(std::span<const std::int64_t> ladders, int workers, std::size_t stride,
                       std::size_t offset, int top, int start, std::int64_t k, std::int64_t cap,
                       std::span<std::int64_t> above, std::span<std::int64_t> room,
                       std::span<std::int64_t> share, std::span<std::int64_t> counts) {
  const auto capped = [&](std::int64_t c) { return cap > 0 && c > cap ? cap : c; };
  const auto bin = [&](int w, int j) {
    return ladders[static_cast<std::size_t>(w) * stride + offset + static_cast<std::size_t>(j)];
  };
  // Count of worker w at or above rung j + 1, starting at j = start (no ladder holds anything
  // above rung `top`: the summed ladder is empty there, and the top 7.75 octaves usually are).
  for (int w = 0; w < workers; ++w)
    above[static_cast<std::size_t>(w)] =
        top > start ? sum_bins(&ladders[static_cast<std::size_t>(w) * stride + offset +
                                        static_cast<std::size_t>(start) + 1],
                               static_cast<std::size_t>(top - start))
                    : 0;
  // A worker whose count reached the cap sends the cap whatever lies below, so the descent adds
  // up only the others (`open`, in share until apportion needs it) and counts the rest as the
  // cap each: under a binding cap most workers reach it within a few rungs of the start (LSTM
  // trace, 16 workers, d = 0.01: a third of the plan's time was this loop over all of them).
  std::int64_t at_cap = 0;  // the cap times the workers at it
  std::size_t open = 0;
  const auto close_or_keep = [&](int w) {
    if (cap > 0 && above[static_cast<std::size_t>(w)] >= cap)
      at_cap += cap;
    else
      share[open++] = w;
  };
  for (int w = 0; w < workers; ++w) close_or_keep(w);
  for (int j = start; j >= 0; --j) {
    std::int64_t reach = at_cap;  // sum over workers of the capped count at or above rung j
    for (std::size_t i = 0; i < open; ++i) {
      const auto w = static_cast<int>(share[i]);
      reach += capped(above[static_cast<std::size_t>(w)] + bin(w, j));
    }
    if (reach >= k || j == 0) {
      std::int64_t base = 0;
      for (int w = 0; w < workers; ++w) {
        counts[w] = capped(above[w]);
        room[w] = capped(above[w] + bin(w, j)) - counts[w];
        base += counts[w];
      }
      const std::int64_t need = std::min(k, reach) - base;
      apportion(need, room, share);
      std::int64_t total = 0;
      for (int w = 0; w < workers; ++w) total += counts[w] += share[w];
      return total;
    }
    const std::size_t was_open = open;
    open = 0;
    for (std::size_t i = 0; i < was_open; ++i) {
      const auto w = static_cast<int>(share[i]);
      above[static_cast<std::size_t>(w)] += bin(w, j);
      close_or_keep(w);
    }
  }
  return 0;  // not reached: j == 0 returns
}

// The smallest cap at or above `cap` under which the workers' whole ladders (held[w]: worker w's
// count at or above rung 0) give `target`, or all they hold when that is less; `cap` itself when
// it gives that already. A binary search over the cap: O(W log(max held)).
std::int64_t feasible_cap(std::span<const std::int64_t> held, std::int64_t target,
                          std::int64_t cap) {
  const auto given = [&](std::int64_t c) {
    std::int64_t sum = 0;
    for (const auto h : held) sum += std::min(h, c);
    return sum;
  };
  const std::int64_t most = *std::max_element(held.begin(), held.end());
  target = std::min(target, given(most));
  if (given(cap) >= target) return cap;
  std::int64_t lo = cap, hi = most;  // given(lo) < target <= given(hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (given(mid) >= target ? hi : lo) = mid;
  }
  return hi;
}

// plan_once under the cap, or, when the cap leaves the ladders short of the target although they
// hold more, under the smallest cap that gives the target (or all they hold): the cap bounds the
// padding, the density is what the user asked for (LSTM trace, 8 workers, d = 0.01, iteration 1:
// exact balance had given one worker a partition of 170 non-zero values, the others stopped at the
// cap, and 0.951 d was sent).
std::int64_t plan_within_cap(std::span<const std::int64_t> ladders, int workers, std::size_t stride,
                             std::size_t offset, int top, int start, std::int64_t k,
                             std::int64_t cap, std::span<std::int64_t> above,
                             std::span<std::int64_t> room, std::span<std::int64_t> share,
                             std::span<std::int64_t> counts) {
  const std::int64_t total =
      plan_once(ladders, workers, stride, offset, top, start, k, cap, above, room, share, counts);
  if (cap <= 0 || total >= k) return total;
  // `above` is scratch that plan_once rewrites: here it holds each worker's whole ladder.
  for (int w = 0; w < workers; ++w) {
    std::int64_t held = 0;
    for (int j = 0; j <= top; ++j)
      held += ladders[static_cast<std::size_t>(w) * stride + offset + static_cast<std::size_t>(j)];
    above[static_cast<std::size_t>(w)] = held;
  }
  const std::int64_t lifted = feasible_cap(above, k, cap);
  if (lifted == cap) return total;
  return plan_once(ladders, workers, stride, offset, top, start, k, lifted, above, room, share,
                   counts);
}

}  // namespace

std::int64_t plan_worker_counts(std::span<const std::int64_t> ladders, int workers,
                                std::size_t stride, std::size_t offset, int rungs, std::int64_t k,
                                std::int64_t cap, std::span<std::int64_t> counts,
                                std::span<std::int64_t> scratch,
                                std::span<const std::int64_t> summed) {
  EXDYNA_CHECK_ARG(workers >= 1 && rungs >= 1 && k >= 1, "ladder plan for ", workers, " workers, ",
                   rungs, " rungs, k = ", k, "; expected all >= 1");
  EXDYNA_CHECK_ARG(offset + static_cast<std::size_t>(rungs) <= stride &&
                       ladders.size() >= stride * static_cast<std::size_t>(workers),
                   "ladder plan: ", ladders.size(), " gathered entries do not hold ", workers,
                   " ladders of ", rungs, " bins at offset ", offset, " of ", stride);
  EXDYNA_CHECK_ARG(counts.size() == static_cast<std::size_t>(workers), "ladder plan into ",
                   counts.size(), " counts; expected ", workers);
  const auto nw = static_cast<std::size_t>(workers);
  EXDYNA_CHECK_ARG(scratch.size() >= 3 * nw, "ladder plan scratch of ", scratch.size(),
                   " entries; expected 3 * workers = ", 3 * nw);
  const auto above = scratch.first(nw), room = scratch.subspan(nw, nw),
             share = scratch.subspan(2 * nw, nw);
  // Workers left with nothing send one index anyway: aim lower by their number, until stable
  // (each round can only add empty workers, so at most `workers` rounds).
  std::int64_t target = k, total = 0;
  for (int round = 0; round <= workers; ++round) {
    int top = rungs - 1;
    const int start =
        first_possible_rung(ladders, workers, stride, offset, rungs, target, summed, &top);
    total = plan_within_cap(ladders, workers, stride, offset, top, start, target, cap, above, room,
                            share, counts);
    const auto empty = static_cast<std::int64_t>(std::count(counts.begin(), counts.end(), 0));
    if (k - empty == target || k - empty < 1) break;
    target = k - empty;
  }
  return total;
}

std::pair<int, std::int64_t> own_cut(std::span<const std::int64_t> bins, std::int64_t count) {
  EXDYNA_CHECK_ARG(!bins.empty() && count >= 0, "own cut of ", count, " from ", bins.size(),
                   " bins; expected count >= 0 and at least one bin");
  if (count == 0) return {static_cast<int>(bins.size()) - 1, 0};
  std::int64_t above = 0;
  for (int j = static_cast<int>(bins.size()) - 1; j >= 0; --j) {
    if (above + bins[j] >= count) return {j, count - above};
    above += bins[j];
  }
  EXDYNA_CHECK_ARG(false, "own cut of ", count, " but the bins hold only ", above);
  return {0, 0};
}

namespace {

// The cut of one worker's bin `r`, as take_cut describes it, after the compaction: every value
// above the bin, and of the bin the `quota` largest, resolved to 1/256 of the bin by sub-bins.
struct SubCut {
  std::uint32_t last = 0;      // the sub-bin holding the quota-th largest; sub_mask + 1: none
  std::int64_t last_need = 0;  // of it, the first last_need in index order
};

// The sub-bin that holds the quota-th largest value: every value above it is taken, and of it the
// first `last_need` in index order (ties and near-ties break towards the lower index).
SubCut find_sub_cut(const std::array<std::uint32_t, 256>& sub, std::uint32_t sub_mask,
                    std::int64_t in_bin, int rung, std::int64_t quota) {
  EXDYNA_CHECK_ARG(quota <= in_bin, "ladder cut quota ", quota, " exceeds the ", in_bin,
                   " values of bin ", rung);
  SubCut cut{sub_mask + 1, 0};  // no sub-bin: quota 0
  if (quota > 0) {
    std::int64_t above = 0;
    for (std::uint32_t s = sub_mask + 1; s-- > 0;) {
      if (above + sub[s] >= quota) {
        cut.last = s;
        cut.last_need = quota - above;
        break;
      }
      above += sub[s];
    }
  }
  return cut;
}

// Both passes one element at a time, branch-free (the bin's values are in no pattern a branch
// predictor could learn). Every entry has bin >= rung (take_cut compacted them).
std::size_t take_cut_scalar(std::uint32_t* idx, const float* abs, std::size_t count,
                            const LadderGrid& grid, int rung, std::int64_t quota) {
  const int shift = 23 - grid.mant_bits;
  const std::uint32_t top = static_cast<std::uint32_t>(grid.rungs - 1);
  // Inside the bin, the next (up to) 8 mantissa bits order the values into 256 sub-bins, each
  // 1/256 of the bin wide (0.017% of the value at 16 rungs per octave).
  const int sub_bits = std::min(8, shift);
  const int sub_shift = shift - sub_bits;
  const std::uint32_t sub_mask = (1u << sub_bits) - 1;
  const auto r = static_cast<std::uint32_t>(rung);
  // Pass 1: the sub-bin counts of the bin's values.
  std::array<std::uint32_t, 256> sub{};
  std::int64_t in_bin = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(abs[i]);
    const std::uint32_t b = std::min((bits >> shift) - grid.lo_key, top);
    const std::uint32_t in = b == r;
    sub[(bits >> sub_shift) & sub_mask] += in;
    in_bin += in;
  }
  const auto [last, last_need] = find_sub_cut(sub, sub_mask, in_bin, rung, quota);
  // Pass 2: keep in place, in index order.
  std::size_t c = 0;
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(abs[i]);
    const std::uint32_t b = std::min((bits >> shift) - grid.lo_key, top);
    const std::uint32_t s = (bits >> sub_shift) & sub_mask;
    const bool in = b == r;
    const bool at_last = in & (s == last);
    const bool keep =
        (b > r) | (in & (s > last) & (last <= sub_mask)) | (at_last & (seen < last_need));
    seen += at_last;
    idx[c] = idx[i];
    c += keep;
  }
  return c;
}

// keep_words_from_bin from entry i on, one at a time and branch-free; kept: how many so far.
std::size_t keep_words_tail(std::uint32_t* words, std::uint8_t* subs, std::size_t i,
                            std::size_t count, int bin, std::size_t kept) {
  for (; i < count; ++i) {
    words[kept] = words[i];
    subs[kept] = subs[i];
    kept += static_cast<int>(words[i] & 0xff) >= bin;
  }
  return kept;
}

#if defined(__SSE2__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The AVX-512 cuts' (take_cut_avx512, cut_words_avx512) count of the cut bin's sub-bins:
// compressed 16 at a time into a small buffer and counted from it; then the cut inside the bin,
// as find_sub_cut gives it: keep the sub-bins above `last`, and of `last` the first `need` in
// index order (last 0xff and need 0 where the quota takes none of the bin).
class SubBinCount {
 public:
  __attribute__((target("avx512f"), always_inline)) void add(__mmask16 in, __m512i subs) {
    _mm512_storeu_si512(buf_ + n_, _mm512_maskz_compress_epi32(in, subs));
    n_ += static_cast<std::size_t>(__builtin_popcount(in));
    if (n_ > kBuf - 16) flush();
  }
  void add(bool in, std::uint32_t sub) {  // one value (the loops' tails)
    buf_[n_] = sub;
    n_ += in;
    if (n_ > kBuf - 16) flush();
  }
  std::pair<std::uint32_t, std::int64_t> cut(int rung, std::int64_t quota) {
    flush();
    const SubCut c = find_sub_cut(sub_, 0xff, in_bin_, rung, quota);
    if (c.last > 0xff) return {0xff, 0};
    return {c.last, c.last_need};
  }

 private:
  void flush() {
    for (std::size_t j = 0; j < n_; ++j) ++sub_[buf_[j]];
    in_bin_ += static_cast<std::int64_t>(n_);
    n_ = 0;
  }
  static constexpr std::size_t kBuf = 512;
  std::array<std::uint32_t, 256> sub_{};
  std::int64_t in_bin_ = 0;
  alignas(64) std::uint32_t buf_[kBuf + 16];
  std::size_t n_ = 0;
};

// Of the lanes `at` (the last sub-bin's, rare), those among the first `need` of it in index order.
inline __mmask16 first_needed(__mmask16 at, std::int64_t& seen, std::int64_t need) {
  __mmask16 keep = 0;
  for (; at != 0; at = static_cast<__mmask16>(at & (at - 1))) {
    if (seen < need) keep = static_cast<__mmask16>(keep | (at & -at));
    ++seen;
  }
  return keep;
}

// The same 16 at a time (take_cut's two scalar passes would be about a third of the exact
// controller's extra selection time). Below the top rung a value's key shifted by 8 bits less,
// fine = bits >> (shift - 8), orders values by bin and then sub-bin, so "bin above r, or the
// bin's sub-bin above last" is fine > (key(r) << 8 | last), and only fine == that (the last
// sub-bin, a few values per call) needs the index-order count, done lane by lane.
// Requires rung < R - 1 (the top bin also holds the values above the ladder) and 8 sub-bits.
__attribute__((target("avx512f"))) std::size_t take_cut_avx512(std::uint32_t* idx, const float* abs,
                                                               std::size_t count,
                                                               const LadderGrid& grid, int rung,
                                                               std::int64_t quota) {
  const int sub_shift = 23 - grid.mant_bits - 8;
  const std::uint32_t bin_key = grid.lo_key + static_cast<std::uint32_t>(rung);
  const __m128i sh = _mm_cvtsi32_si128(sub_shift);
  const __m512i bin_v = _mm512_set1_epi32(static_cast<int>(bin_key));
  const __m512i low8 = _mm512_set1_epi32(0xff);
  SubBinCount sub;  // pass 1: the sub-bins of the bin's values
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i fine = _mm512_srl_epi32(_mm512_loadu_si512(abs + i), sh);
    sub.add(_mm512_cmpeq_epi32_mask(_mm512_srli_epi32(fine, 8), bin_v),
            _mm512_and_si512(fine, low8));
  }
  for (; i < count; ++i) {
    const std::uint32_t fine = std::bit_cast<std::uint32_t>(abs[i]) >> sub_shift;
    sub.add((fine >> 8) == bin_key, fine & 0xff);
  }
  const auto [last, need] = sub.cut(rung, quota);
  // Pass 2: keep fine > cut, and of fine == cut the first `need` in index order.
  const std::uint32_t cut = bin_key << 8 | last;
  const __m512i cut_v = _mm512_set1_epi32(static_cast<int>(cut));
  std::size_t c = 0;
  std::int64_t seen = 0;
  for (i = 0; i + 16 <= count; i += 16) {
    const __m512i fine = _mm512_srl_epi32(_mm512_loadu_si512(abs + i), sh);
    const __m512i x = _mm512_loadu_si512(idx + i);
    const __mmask16 keep = _mm512_cmpgt_epu32_mask(fine, cut_v) |
                           first_needed(_mm512_cmpeq_epi32_mask(fine, cut_v), seen, need);
    _mm512_storeu_si512(idx + c, _mm512_maskz_compress_epi32(keep, x));  // c <= i: in place
    c += static_cast<std::size_t>(__builtin_popcount(keep));
  }
  for (; i < count; ++i) {
    const std::uint32_t fine = std::bit_cast<std::uint32_t>(abs[i]) >> sub_shift;
    const bool at_cut = fine == cut;
    const bool keep = (fine > cut) | (at_cut & (seen < need));
    seen += at_cut;
    idx[c] = idx[i];
    c += keep;
  }
  return c;
}
// 16 sub-bins of collect_ladder_words, widened to 32-bit lanes.
__attribute__((target("avx512f"), always_inline)) inline __m512i load_subs16(
    const std::uint8_t* s) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
}

// The cut of collect_ladder_words' words from the words and their sub-bins alone. Expanding the
// kept words to indices and |x| gathered from a partition that the counts all-gather has let
// other work evict from the cache costs most of the cut: on the LSTM trace (16 workers in one
// process, d = 0.01) 3.4 of own_cut's 4.3 us; in training, backward and data loading run there.
// The same decisions as take_cut_scalar: a word of bin b >= rung is kept if b > rung, or b = rung
// and its sub-bin above the last, or at the last and among the first last_need there in index
// order.
__attribute__((target("avx512f"))) std::size_t cut_words_avx512(std::uint32_t offset,
                                                                std::uint32_t* words,
                                                                const std::uint8_t* subs,
                                                                std::size_t count, int rung,
                                                                std::int64_t quota) {
  const auto r = static_cast<std::uint32_t>(rung);
  const __m512i rung_v = _mm512_set1_epi32(static_cast<int>(r));
  const __m512i low8 = _mm512_set1_epi32(0xff);
  SubBinCount sub;  // pass 1: the sub-bins of bin `rung`
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __mmask16 eq =
        _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_loadu_si512(words + i), low8), rung_v);
    if (eq != 0) sub.add(eq, load_subs16(subs + i));
  }
  for (; i < count; ++i) sub.add((words[i] & 0xff) == r, subs[i]);
  const auto [last, need] = sub.cut(rung, quota);
  // Pass 2: keep, as indices, in place: bin and sub-bin as one key, (bin << 8 | sub) above
  // (rung << 8 | last), and of it equal the first `need` (none of the bin: last 0xff, need 0).
  const std::uint32_t cut = r << 8 | last;
  const __m512i cut_v = _mm512_set1_epi32(static_cast<int>(cut));
  const __m512i off = _mm512_set1_epi32(static_cast<int>(offset));
  std::size_t kept = 0;
  std::int64_t seen = 0;
  for (i = 0; i + 16 <= count; i += 16) {
    const __m512i w = _mm512_loadu_si512(words + i);
    const __m512i key =
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(w, low8), 8), load_subs16(subs + i));
    const __mmask16 keep = _mm512_cmpgt_epu32_mask(key, cut_v) |
                           first_needed(_mm512_cmpeq_epi32_mask(key, cut_v), seen, need);
    _mm512_storeu_si512(words + kept, _mm512_maskz_compress_epi32(
                                          keep, _mm512_add_epi32(_mm512_srli_epi32(w, 8), off)));
    kept += static_cast<std::size_t>(__builtin_popcount(keep));
  }
  for (; i < count; ++i) {
    const std::uint32_t w = words[i], key = (w & 0xff) << 8 | subs[i];
    const bool at_cut = key == cut;
    const bool keep = key > cut || (at_cut && seen < need);
    seen += at_cut;
    words[kept] = offset + (w >> 8);
    kept += keep;
  }
  return kept;
}

// keep_words_from_bin 16 words at a time (the sub-bins widened to lanes, compressed alike). In
// place: the 16 stores at kept <= i never pass the 16 entries just loaded.
__attribute__((target("avx512f"))) std::size_t keep_words_avx512(std::uint32_t* words,
                                                                 std::uint8_t* subs,
                                                                 std::size_t count, int bin) {
  const __m512i bin_v = _mm512_set1_epi32(bin);
  const __m512i low8 = _mm512_set1_epi32(0xff);
  std::size_t kept = 0, i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i w = _mm512_loadu_si512(words + i);
    const __mmask16 keep = _mm512_cmpge_epu32_mask(_mm512_and_si512(w, low8), bin_v);
    const __m512i s = _mm512_maskz_compress_epi32(keep, load_subs16(subs + i));
    _mm512_storeu_si512(words + kept, _mm512_maskz_compress_epi32(keep, w));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(subs + kept), _mm512_cvtepi32_epi8(s));
    kept += static_cast<std::size_t>(__builtin_popcount(keep));
  }
  return keep_words_tail(words, subs, i, count, bin, kept);
}
#pragma GCC diagnostic pop
#endif

void check_cut(const LadderGrid& grid, int rung, std::int64_t quota) {
  EXDYNA_CHECK_ARG(rung >= 0 && rung < grid.rungs, "ladder cut at rung ", rung, "; expected 0..",
                   grid.rungs - 1);
  EXDYNA_CHECK_ARG(quota >= 0, "ladder cut quota ", quota, "; expected >= 0");
}

// take_cut's passes on candidates already compacted to bin `rung` and above.
std::size_t cut_compacted(SelectKernel k, std::uint32_t* idx, const float* abs, std::size_t count,
                          const LadderGrid& grid, int rung, std::int64_t quota) {
#if defined(__SSE2__)
  if (k == SelectKernel::kAvx512 && rung < grid.rungs - 1 && 23 - grid.mant_bits >= 8)
    return take_cut_avx512(idx, abs, count, grid, rung, quota);
#endif
  return take_cut_scalar(idx, abs, count, grid, rung, quota);
}

}  // namespace

std::size_t take_cut_with(SelectKernel k, std::uint32_t* idx, float* abs, std::size_t count,
                          const LadderGrid& grid, int rung, std::int64_t quota) {
  check_cut(grid, rung, quota);
  EXDYNA_CHECK_ARG(select_kernel_available(k), "selection kernel ", to_string(k),
                   " is not available on this CPU");
  // Bin >= rung is |x| >= value(rung) exactly (the rungs are floats of the grid, and the
  // candidates hold no NaN): drop the rest first, so the passes below see about k_i plus one bin.
  count = keep_pairs_at_least_with(k, idx, abs, count, grid.value(rung));
  return cut_compacted(k, idx, abs, count, grid, rung, quota);
}

std::size_t take_cut_words(std::uint32_t offset, std::uint32_t* words, const std::uint8_t* subs,
                           std::size_t count, const LadderGrid& grid, int rung,
                           std::int64_t quota) {
  check_cut(grid, rung, quota);
  EXDYNA_CHECK_ARG(
      grid.rungs <= 256 && grid.mant_bits <= 7 && select_kernel_available(SelectKernel::kAvx512),
      "ladder words of ", grid.rungs, " rungs and ", grid.mant_bits,
      " mantissa bits; expected <= 256 and <= 7 on the avx512 kernel");
#if defined(__SSE2__)
  return cut_words_avx512(offset, words, subs, count, rung, quota);
#else
  (void)offset;
  (void)words;
  (void)subs;
  return count;
#endif
}

std::size_t keep_words_from_bin(std::uint32_t* words, std::uint8_t* subs, std::size_t count,
                                int bin) {
  EXDYNA_CHECK_ARG(bin >= 0 && bin < 256, "ladder words from bin ", bin, "; expected 0..255");
#if defined(__SSE2__)
  if (select_kernel_available(SelectKernel::kAvx512))
    return keep_words_avx512(words, subs, count, bin);
#endif
  return keep_words_tail(words, subs, 0, count, bin, 0);
}

std::size_t take_cut(std::uint32_t* idx, float* abs, std::size_t count, const LadderGrid& grid,
                     int rung, std::int64_t quota) {
  return take_cut_with(select_kernel_in_use(), idx, abs, count, grid, rung, quota);
}

}  // namespace exdyna::sparsifiers
