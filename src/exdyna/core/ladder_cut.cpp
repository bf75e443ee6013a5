#include "exdyna/core/ladder_cut.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
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
                       std::span<std::int64_t> above, std::span<std::int64_t> room,
                       std::span<std::int64_t> share, std::span<std::int64_t> counts) {
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
                                std::int64_t cap, std::span<std::int64_t> counts,
                                std::span<std::int64_t> scratch) {
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

std::size_t take_cut(std::uint32_t* idx, float* abs, std::size_t count, const LadderGrid& grid,
                     int rung, std::int64_t quota) {
  EXDYNA_CHECK_ARG(rung >= 0 && rung < grid.rungs, "ladder cut at rung ", rung, "; expected 0..",
                   grid.rungs - 1);
  EXDYNA_CHECK_ARG(quota >= 0, "ladder cut quota ", quota, "; expected >= 0");
  // Bin >= rung is |x| >= value(rung) exactly (the rungs are floats of the grid, and the
  // candidates hold no NaN): drop the rest first, so the passes below see about k_i plus one bin.
  count = keep_pairs_at_least(idx, abs, count, grid.value(rung));
  const int shift = 23 - grid.mant_bits;
  const std::uint32_t top = static_cast<std::uint32_t>(grid.rungs - 1);
  // Inside the bin, the next (up to) 8 mantissa bits order the values into 256 sub-bins, each
  // 1/256 of the bin wide (0.017% of the value at 16 rungs per octave).
  const int sub_bits = std::min(8, shift);
  const int sub_shift = shift - sub_bits;
  const std::uint32_t sub_mask = (1u << sub_bits) - 1;
  const auto r = static_cast<std::uint32_t>(rung);
  // Pass 1, branch-free: the sub-bin counts of the bin's values (about a fifth of the candidates
  // at 16 rungs per octave, in no pattern a branch predictor could learn).
  std::array<std::uint32_t, 256> sub{};
  std::int64_t in_bin = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(abs[i]);
    const std::uint32_t b = std::min((bits >> shift) - grid.lo_key, top);
    const std::uint32_t in = b == r;
    sub[(bits >> sub_shift) & sub_mask] += in;
    in_bin += in;
  }
  EXDYNA_CHECK_ARG(quota <= in_bin, "ladder cut quota ", quota, " exceeds the ", in_bin,
                   " values of bin ", rung);
  // The sub-bin that holds the quota-th largest value: every value above it is taken, and of it
  // the first `last_need` in index order (ties and near-ties break towards the lower index).
  std::uint32_t last = sub_mask + 1;  // no sub-bin: quota 0
  std::int64_t last_need = 0;
  if (quota > 0) {
    std::int64_t above = 0;
    for (std::uint32_t s = sub_mask + 1; s-- > 0;) {
      if (above + sub[s] >= quota) {
        last = s;
        last_need = quota - above;
        break;
      }
      above += sub[s];
    }
  }
  // Pass 2, branch-free: keep in place, in index order.
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

}  // namespace exdyna::core
