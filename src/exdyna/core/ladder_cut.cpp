#include "exdyna/core/ladder_cut.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>

#include "exdyna/core/error.hpp"

namespace exdyna::core {

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
  // floor(need * have / total) exactly (128-bit products), then one more to the largest
  // remainders until the shares add up to need.
  std::int64_t given = 0;
  for (std::size_t w = 0; w < have.size(); ++w) {
    const auto p = static_cast<unsigned __int128>(need) * static_cast<unsigned __int128>(have[w]);
    share[w] = static_cast<std::int64_t>(p / static_cast<unsigned __int128>(total));
    given += share[w];
  }
  const auto remainder = [&](std::size_t w) {
    const auto p = static_cast<unsigned __int128>(need) * static_cast<unsigned __int128>(have[w]);
    return static_cast<std::int64_t>(p % static_cast<unsigned __int128>(total));
  };
  for (std::int64_t left = need - given; left > 0; --left) {
    std::size_t best = have.size();
    std::int64_t best_r = 0;
    for (std::size_t w = 0; w < have.size(); ++w) {
      // A worker already raised has remainder 0 from here on (marked by share > floor).
      const auto p = static_cast<unsigned __int128>(need) * static_cast<unsigned __int128>(have[w]);
      if (static_cast<std::int64_t>(p / static_cast<unsigned __int128>(total)) != share[w])
        continue;
      const std::int64_t r = remainder(w);
      if (r > best_r) {
        best = w;
        best_r = r;
      }
    }
    EXDYNA_CHECK(best < have.size(), "apportion found no remainder for ", left, " of ", need);
    ++share[best];
  }
}

std::size_t take_cut(std::uint32_t* idx, const float* abs, std::size_t count,
                     const LadderGrid& grid, int rung, std::int64_t quota,
                     std::vector<float>& scratch) {
  EXDYNA_CHECK_ARG(rung >= 0 && rung < grid.rungs, "ladder cut at rung ", rung, "; expected 0..",
                   grid.rungs - 1);
  EXDYNA_CHECK_ARG(quota >= 0, "ladder cut quota ", quota, "; expected >= 0");
  const int shift = 23 - grid.mant_bits;
  const std::uint32_t top = static_cast<std::uint32_t>(grid.rungs - 1);
  const auto bin = [&](float a) {
    const std::uint32_t b = (std::bit_cast<std::uint32_t>(a) >> shift) - grid.lo_key;
    return b < top ? b : top;
  };
  const auto r = static_cast<std::uint32_t>(rung);
  // The bin's values (branch-free: about a fifth of the candidates fall in it, in no pattern the
  // branch predictor could learn). scratch keeps its capacity between steps.
  if (scratch.size() < count) scratch.resize(count);
  std::size_t m = 0;
  for (std::size_t i = 0; i < count; ++i) {
    scratch[m] = abs[i];
    m += bin(abs[i]) == r;
  }
  EXDYNA_CHECK_ARG(quota <= static_cast<std::int64_t>(m), "ladder cut quota ", quota,
                   " exceeds the ", m, " values of bin ", rung);
  // The quota-th largest value of the bin, pv; all values above it are taken, and of those equal
  // to it the first (quota - #above) in index order, so ties break towards the lower index.
  float pv = std::numeric_limits<float>::infinity();
  std::int64_t eq_need = 0;
  if (quota > 0) {
    const auto nth = scratch.begin() + (quota - 1);
    std::nth_element(scratch.begin(), nth, scratch.begin() + static_cast<std::ptrdiff_t>(m),
                     std::greater<float>());
    pv = *nth;
    std::int64_t above = 0;
    for (std::size_t i = 0; i < m; ++i) above += scratch[i] > pv;
    eq_need = quota - above;
  }
  std::size_t c = 0;
  std::int64_t eq_seen = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t b = bin(abs[i]);
    const bool in_bin = b == r;
    const bool eq = in_bin & (abs[i] == pv);
    const bool keep = (b > r) | (in_bin & (abs[i] > pv)) | (eq & (eq_seen < eq_need));
    eq_seen += eq;
    idx[c] = idx[i];
    c += keep;
  }
  return c;
}

}  // namespace exdyna::core
