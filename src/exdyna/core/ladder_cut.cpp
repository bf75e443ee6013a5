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

namespace {

// One pass of the plan for a target `k`; returns the total.
std::int64_t plan_once(std::span<const std::int64_t> ladders, int workers, std::size_t stride,
                       std::size_t offset, int rungs, std::int64_t k, std::int64_t cap,
                       std::vector<std::int64_t>& above, std::vector<std::int64_t>& room,
                       std::vector<std::int64_t>& share, std::span<std::int64_t> counts) {
  const auto capped = [&](std::int64_t c) { return cap > 0 && c > cap ? cap : c; };
  const auto bin = [&](int w, int j) {
    return ladders[static_cast<std::size_t>(w) * stride + offset + static_cast<std::size_t>(j)];
  };
  std::fill(above.begin(), above.end(), 0);  // count of worker w at or above rung j + 1
  for (int j = rungs - 1; j >= 0; --j) {
    std::int64_t reach = 0;  // sum over workers of the capped count at or above rung j
    for (int w = 0; w < workers; ++w) reach += capped(above[w] + bin(w, j));
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
    for (int w = 0; w < workers; ++w) above[w] += bin(w, j);
  }
  return 0;  // not reached: j == 0 returns
}

}  // namespace

std::int64_t plan_worker_counts(std::span<const std::int64_t> ladders, int workers,
                                std::size_t stride, std::size_t offset, int rungs, std::int64_t k,
                                std::int64_t cap, std::span<std::int64_t> counts) {
  EXDYNA_CHECK_ARG(workers >= 1 && rungs >= 1 && k >= 1, "ladder plan for ", workers, " workers, ",
                   rungs, " rungs, k = ", k, "; expected all >= 1");
  EXDYNA_CHECK_ARG(offset + static_cast<std::size_t>(rungs) <= stride &&
                       ladders.size() >= stride * static_cast<std::size_t>(workers),
                   "ladder plan: ", ladders.size(), " gathered entries do not hold ", workers,
                   " ladders of ", rungs, " bins at offset ", offset, " of ", stride);
  EXDYNA_CHECK_ARG(counts.size() == static_cast<std::size_t>(workers), "ladder plan into ",
                   counts.size(), " counts; expected ", workers);
  const auto nw = static_cast<std::size_t>(workers);
  std::vector<std::int64_t> above(nw), room(nw), share(nw);
  // Workers left with nothing send one index anyway: aim lower by their number, until stable
  // (each round can only add empty workers, so at most `workers` rounds).
  std::int64_t target = k, total = 0;
  for (int round = 0; round <= workers; ++round) {
    total =
        plan_once(ladders, workers, stride, offset, rungs, target, cap, above, room, share, counts);
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
