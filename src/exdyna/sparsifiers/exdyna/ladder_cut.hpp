// The exact controller (ExDynaOptions::controller = kExact): the selection of one iteration
// that holds exactly k values, read off the ladders every worker gathered with its count.
//
// The histogram controller (threshold.hpp) uses the summed ladder to place the NEXT threshold, so
// every iteration still selects with a threshold estimated from the previous one, and the density
// follows the gradient's drift one iteration late (after a scale step it dipped to 0.82 d for
// a dozen iterations at d = 0.001). The exact controller uses the same ladder for THIS
// iteration: every worker collects the candidates at or above the ladder's lowest rung (its
// selection pass stores them instead of only those above the threshold), gathers its ladder with
// its count, and then every rank reads off the same cut from the gathered ladders:
//   * the highest rung j whose global count reaches k; every candidate above bin j is selected;
//   * the remaining k - count(>= rung j + 1) are taken from bin j, apportioned to the workers in
//     proportion to their count in bin j (largest remainders, ties to the lower rank), each worker
//     taking its largest values of that bin.
// Each worker's k_i follows from the gathered ladders alone, so every rank knows every k_i (the
// padded all-gather's size) without another collective, and the global selection is exactly k
// whenever the ladder holds k. It is a global threshold up to one bin (4.4% wide at 16 rungs per
// octave): inside bin j the split follows the workers' shares, not the exact order of values.
// When the ladder holds fewer than k (rung 0 above the k-th largest value) every candidate is
// selected and the histogram controller widens the next ladder, as it does alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

struct LadderCut {
  int rung = 0;            // the bin taken in part; bins above it are taken whole
  std::int64_t need = 0;   // how many values of bin `rung` are taken, over all workers
  std::int64_t total = 0;  // values selected over all workers: k, or all candidates if fewer
  bool bracketed = false;  // total == k
};

// summed: the ladder bins summed over all workers (R >= 1 entries, each >= 0). k >= 1.
LadderCut cut_ladder(std::span<const std::int64_t> summed, std::int64_t k);

// share[w] for every worker: need split in proportion to have[w] by largest remainders (ties to
// the lower index), so that sum(share) = need and share[w] <= have[w]. Requires
// 0 <= need <= sum(have).
void apportion(std::int64_t need, std::span<const std::int64_t> have,
               std::span<std::int64_t> share);

// The whole plan of one iteration, from the gathered ladders: how many values each worker sends.
// ladders: worker w's R bins at ladders[w * stride + offset + j] (the count all-gather's layout).
// Without a cap (cap <= 0) it is cut_ladder's cut: counts[w] = worker w's count above bin j plus
// its apportioned share of bin j. With a cap, no worker sends more than `cap` values: the cut
// moves down until the capped counts, sum_w min(count_w(>= rung), cap), reach k, so the workers
// under the cap send a little more and a capped worker's excess stays in its residual (error
// feedback sends it later). When the cap leaves the ladders short of k although they hold more (a
// worker whose partition holds fewer values than its share), the cap yields: the plan takes the
// smallest cap that reaches k (or all the ladders hold, if less), so the density stays exact and
// only that iteration pads more.
// Either way each worker sends its own largest values.
// A worker whose count is 0 still sends one index (the sparsifier's rule: no empty buffer), so the
// plan aims at k minus the number of such workers, to keep the total at k.
// Returns the total (k whenever the ladders hold enough).
std::int64_t plan_worker_counts(std::span<const std::int64_t> ladders, int workers,
                                std::size_t stride, std::size_t offset, int rungs, std::int64_t k,
                                std::int64_t cap, std::span<std::int64_t> counts,
                                std::span<std::int64_t> scratch,
                                std::span<const std::int64_t> summed = {});
// scratch: at least 3 * workers entries, overwritten (the caller keeps it, so the per-step path
// does not allocate). summed: optional, the R bins summed over the workers when the caller holds
// them already (the sparsifier does), so the plan need not add up the w ladders again to find
// where to start; it must be the sum of these ladders (empty: the plan sums them itself).

// Worker w's (rung, quota) for take_cut that keeps its `count` largest candidates, from its own
// bins (R entries): the highest rung whose count reaches `count`, and the part of that bin.
std::pair<int, std::int64_t> own_cut(std::span<const std::int64_t> bins, std::int64_t count);

// One worker's part of the cut: keeps, in place and in index order, the candidates (idx, abs from
// collect_ladder_candidates with `grid`) whose bin lies above `rung`, and the `quota` largest of
// bin `rung`, resolved to 1/256 of the bin (values closer than that: the lower index first).
// Returns how many are kept. First a vector compaction of idx and abs to the candidates at or
// above the bin (keep_pairs_at_least: abs is scratch afterwards), then two branch-free passes
// over those only, no sort: the candidates below the cut, often most of them, cost one compare.
std::size_t take_cut(std::uint32_t* idx, float* abs, std::size_t count, const LadderGrid& grid,
                     int rung, std::int64_t quota);
// With a given implementation (the AVX-512 one runs both passes 16 candidates at a time below the
// top rung; the others, and the top rung, one at a time): the same result on every kernel.
std::size_t take_cut_with(SelectKernel k, std::uint32_t* idx, float* abs, std::size_t count,
                          const LadderGrid& grid, int rung, std::int64_t quota);
// The same cut of the words and sub-bins of collect_ladder_words (same grid, offset as the
// indices take), into indices in words, in place: the same
// indices, in the same order, as take_cut on collect_ladder_candidates' output; returns how many.
// The partition is not read again.
std::size_t take_cut_words(std::uint32_t offset, std::uint32_t* words, const std::uint8_t* subs,
                           std::size_t count, const LadderGrid& grid, int rung, std::int64_t quota);

// Drops, in place and in order, the words of collect_ladder_words (and their sub-bins) whose bin
// lies below `bin`; returns how many are left. take_cut_words at any rung >= bin then gives the
// same indices as on all the words: a worker under a cap compacts its words to the bin of its
// cap-th largest value before the counts all-gather, while they are in cache, since it never
// sends more than the cap unless the cap yields.
std::size_t keep_words_from_bin(std::uint32_t* words, std::uint8_t* subs, std::size_t count,
                                int bin);

// Exact from iteration 0: the first threshold (1 / (2 sqrt k)) may lie orders of
// magnitude from the k-th largest |acc| (a word-level LSTM's first gradients: 10^3..10^6 below),
// and a ladder placed around it holds k only after a few iterations. The first iteration's ladder
// is instead one rung per octave from the global max |acc| down `rungs` - 1 octaves (past the
// smallest normal float for the default 129 rungs), so it holds every non-zero value and the cut
// is exact; the sub-bins of take_cut resolve the cut to 1/256 of an octave.
LadderGrid cold_ladder(float max_abs, int rungs);

// The value at which `cut` (from cut_ladder on the summed bins of `grid`) falls inside its bin,
// taking the values as spread evenly in log inside the bin: the next threshold after a cold
// ladder. The bin's lower edge when the ladder held fewer than k.
double cut_value(const LadderGrid& grid, std::span<const std::int64_t> summed,
                 const LadderCut& cut);

}  // namespace exdyna::sparsifiers
