// The exact controller's plan in the form one GPU thread runs it: how many values each worker
// sends (plan_worker_counts of ladder_cut.hpp) and this worker's own cut (own_cut), from ladders
// decoded by device_wire.hpp, as __host__ __device__ functions over plain arrays that throw
// nothing and allocate nothing. A step that stays on the device plans there from the gathered
// slots, so the host never waits for them; the host reads the same slots later for its own state
// and must reach the same counts.
//
// They are the CPU functions' plain loops, without the CPU plan's shortcuts (the start rung read
// off the summed ladder, the workers closed at the cap, the AVX-512 sums): the shortcuts skip only
// rungs and workers that cannot change a count. Where the CPU functions throw, these return a
// PlanStatus. tests/unit/sparsifiers/exdyna/device_plan_test.cpp holds them to the CPU functions
// on the CPU; exdyna_cuda_check runs the kernel (ladder_cut.cu) against them on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "exdyna/core/device_rules.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"

namespace exdyna::sparsifiers::rules {

// apportion: need split in proportion to have[w] by largest remainders, ties to the lower worker.
// rem: `workers` entries of scratch.
EXDYNA_HD int apportion_shares(std::int64_t need, const std::int64_t* have, int workers,
                               std::int64_t* share, std::int64_t* rem) {
  std::int64_t total = 0;
  for (int w = 0; w < workers; ++w) {
    if (have[w] < 0) return kPlanShareFailed;
    total += have[w];
  }
  if (need < 0 || need > total) return kPlanShareFailed;
  for (int w = 0; w < workers; ++w) share[w] = 0;
  if (need == 0 || total == 0) return kPlanOk;
  std::int64_t given = 0;
  for (int w = 0; w < workers; ++w) {
    if (have[w] == 0 || need <= INT64_MAX / have[w]) {
      share[w] = need * have[w] / total;
      rem[w] = need * have[w] % total;
    } else {  // the exact product in 128 bits
      const auto p = static_cast<unsigned __int128>(need) * static_cast<unsigned __int128>(have[w]);
      share[w] = static_cast<std::int64_t>(p / static_cast<unsigned __int128>(total));
      rem[w] = static_cast<std::int64_t>(p % static_cast<unsigned __int128>(total));
    }
    given += share[w];
  }
  for (std::int64_t left = need - given; left > 0; --left) {
    int best = -1;
    std::int64_t best_r = 0;
    for (int w = 0; w < workers; ++w) {
      if (rem[w] > best_r) {
        best = w;
        best_r = rem[w];
      }
    }
    if (best < 0) return kPlanShareFailed;
    ++share[best];
    rem[best] = 0;
  }
  return kPlanOk;
}

// Where the plan reads worker w's bin j: ladders[w * stride + offset + j], `rungs` bins each.
struct PlanLadders {
  const std::int64_t* ladders = nullptr;
  int workers = 0;
  std::size_t stride = 0;
  std::size_t offset = 0;
  int rungs = 0;
  EXDYNA_HD std::int64_t bin(int w, int j) const {
    return ladders[static_cast<std::size_t>(w) * stride + offset + static_cast<std::size_t>(j)];
  }
};

EXDYNA_HD std::int64_t capped_at(std::int64_t c, std::int64_t cap) {
  return cap > 0 && c > cap ? cap : c;
}

// One pass of the plan for target k under cap, from the top rung down: the highest rung j at
// which the capped counts sum_w min(count_w(>= j), cap) reach k (or rung 0), every worker's
// capped count above j, and the rest of k apportioned over the workers' capped room in bin j.
// scratch: 4 * workers entries. Returns the total (sum of counts), or -1 with *status set.
EXDYNA_HD std::int64_t plan_once_form(const PlanLadders& L, std::int64_t k, std::int64_t cap,
                                      std::int64_t* counts, std::int64_t* scratch, int* status) {
  const int n = L.workers;
  std::int64_t *above = scratch, *room = scratch + n, *share = scratch + 2 * n,
               *rem = scratch + 3 * n;
  for (int w = 0; w < n; ++w) above[w] = 0;
  for (int j = L.rungs - 1; j >= 0; --j) {
    std::int64_t reach = 0;
    for (int w = 0; w < n; ++w) reach += capped_at(above[w] + L.bin(w, j), cap);
    if (reach >= k || j == 0) {
      std::int64_t base = 0;
      for (int w = 0; w < n; ++w) {
        counts[w] = capped_at(above[w], cap);
        room[w] = capped_at(above[w] + L.bin(w, j), cap) - counts[w];
        base += counts[w];
      }
      const std::int64_t need = (k < reach ? k : reach) - base;
      *status = apportion_shares(need, room, n, share, rem);
      if (*status != kPlanOk) return -1;
      std::int64_t total = 0;
      for (int w = 0; w < n; ++w) total += counts[w] += share[w];
      return total;
    }
    for (int w = 0; w < n; ++w) above[w] += L.bin(w, j);
  }
  return 0;  // not reached: j == 0 returns
}

// plan_once_form under the cap or, where the cap leaves the ladders short of k although they hold
// more, under the smallest cap that reaches k (or all they hold): feasible_cap's binary search.
EXDYNA_HD std::int64_t plan_within_cap_form(const PlanLadders& L, std::int64_t k, std::int64_t cap,
                                            std::int64_t* counts, std::int64_t* scratch,
                                            int* status) {
  const std::int64_t total = plan_once_form(L, k, cap, counts, scratch, status);
  if (*status != kPlanOk || cap <= 0 || total >= k) return total;
  std::int64_t* held = scratch;  // each worker's whole ladder (plan_once_form rewrites it after)
  std::int64_t most = 0;
  for (int w = 0; w < L.workers; ++w) {
    held[w] = 0;
    for (int j = 0; j < L.rungs; ++j) held[w] += L.bin(w, j);
    if (held[w] > most) most = held[w];
  }
  const auto given = [&](std::int64_t c) {
    std::int64_t sum = 0;
    for (int w = 0; w < L.workers; ++w) sum += held[w] < c ? held[w] : c;
    return sum;
  };
  const std::int64_t all = given(most);
  const std::int64_t target = k < all ? k : all;
  if (given(cap) >= target) return total;
  std::int64_t lo = cap, hi = most;  // given(lo) < target <= given(hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (given(mid) >= target)
      hi = mid;
    else
      lo = mid;
  }
  return plan_once_form(L, k, hi, counts, scratch, status);
}

// plan_worker_counts: counts[w] for every worker, aiming k minus the workers left with nothing
// (each sends one index anyway) until that number is stable. Returns the total; *status says
// whether it is one.
EXDYNA_HD std::int64_t plan_counts_form(const PlanLadders& L, std::int64_t k, std::int64_t cap,
                                        std::int64_t* counts, std::int64_t* scratch, int* status) {
  *status = kPlanOk;
  std::int64_t target = k, total = 0;
  for (int round = 0; round <= L.workers; ++round) {
    total = plan_within_cap_form(L, target, cap, counts, scratch, status);
    if (*status != kPlanOk) return total;
    std::int64_t empty = 0;
    for (int w = 0; w < L.workers; ++w) empty += counts[w] == 0 ? 1 : 0;
    if (k - empty == target || k - empty < 1) break;
    target = k - empty;
  }
  return total;
}

// own_cut: the highest rung whose count from the top reaches `count`, and the part of that bin.
EXDYNA_HD int own_cut_form(const std::int64_t* bins, int rungs, std::int64_t count, int* rung,
                           std::int64_t* quota) {
  if (count < 0 || rungs < 1) return kOwnCutShort;
  if (count == 0) {
    *rung = rungs - 1;
    *quota = 0;
    return kPlanOk;
  }
  std::int64_t above = 0;
  for (int j = rungs - 1; j >= 0; --j) {
    if (above + bins[j] >= count) {
      *rung = j;
      *quota = count - above;
      return kPlanOk;
    }
    above += bins[j];
  }
  return kOwnCutShort;
}

}  // namespace exdyna::sparsifiers::rules
