#include "exdyna/sparsifiers/exdyna/partition.hpp"

#include <algorithm>
#include <cmath>

#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers {

BlockLayout make_block_layout(std::int64_t n_g, int world_size, std::int64_t n_blocks_requested) {
  EXDYNA_CHECK_ARG(world_size >= 1, "world size ", world_size, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(n_g >= world_size, "n_g ", n_g, " is smaller than the number of workers ",
                   world_size, "; expected n_g >= workers");
  EXDYNA_CHECK_ARG(n_blocks_requested >= world_size, "n_b (blocks) ", n_blocks_requested,
                   " is smaller than the number of workers ", world_size,
                   "; expected n_b >= workers");
  BlockLayout l;
  l.n_g = n_g;
  l.n_blocks = n_blocks_requested;
  // Alg. 2 lines 1-2: temp = n_g / n_b; sz_blk = temp - temp % 32.
  auto rounded = [](std::int64_t t) { return t - t % 32; };
  l.block_size = rounded(n_g / l.n_blocks);
  if (l.block_size == 0) {
    const std::int64_t nb = std::max<std::int64_t>(world_size, n_g / 32);
    l.n_blocks = nb;
    l.block_size = rounded(n_g / nb);
    if (l.block_size == 0) {
      // Even n workers' worth of blocks would be under 32 elements: one block per worker.
      l.n_blocks = world_size;
      l.block_size = n_g / world_size;
      l.note = detail::concat("n_g = ", n_g, " < 32 * n_b = ", 32 * n_blocks_requested,
                              ": using n_b = ", l.n_blocks,
                              " blocks of floor(n_g / n) = ", l.block_size, " elements (under 32)");
    } else {
      l.note = detail::concat("n_g = ", n_g, " < 32 * n_b = ", 32 * n_blocks_requested,
                              ": using n_b = max(n, floor(n_g / 32)) = ", l.n_blocks, " blocks of ",
                              l.block_size, " elements");
    }
  }
  l.inv_block_size = 1.0 / static_cast<double>(l.block_size);
  return l;
}

Partitions::Partitions(const BlockLayout& layout, int world_size, double min_blk,
                       std::int64_t blk_move, double alpha)
    : layout_(layout), blk_move_(blk_move), alpha_(alpha) {
  EXDYNA_CHECK_ARG(world_size >= 1, "world size ", world_size, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(layout.n_blocks >= world_size, "n_b (blocks) ", layout.n_blocks,
                   " is smaller than the number of workers ", world_size,
                   "; expected n_b >= workers");
  EXDYNA_CHECK_ARG(layout.block_size >= 1 && layout.n_blocks * layout.block_size <= layout.n_g,
                   "block layout of ", layout.n_blocks, " blocks of ", layout.block_size,
                   " elements does not fit n_g = ", layout.n_g);
  EXDYNA_CHECK_ARG(blk_move >= 1, "blk_move ", blk_move, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(std::isfinite(alpha) && alpha > 1, "alpha ", alpha,
                   " is not valid; expected > 1");
  layout_.inv_block_size = 1.0 / static_cast<double>(layout.block_size);
  // Default: n_b / (4n) as a real number (1024 / 20 = 51.2, not 51).
  min_blk_ = min_blk < 0 ? static_cast<double>(layout.n_blocks) / (4.0 * world_size) : min_blk;
  const std::int64_t quotient = layout.n_blocks / world_size;
  EXDYNA_CHECK_ARG(std::isfinite(min_blk_) && min_blk_ <= static_cast<double>(quotient), "min_blk ",
                   min_blk_, " is not valid for n_b = ", layout.n_blocks, " and ", world_size,
                   " workers; expected <= floor(n_b / n) = ", quotient);
  // Alg. 2 lines 3-14: the first n_b % n partitions get one block more.
  const std::int64_t remainder = layout.n_blocks % world_size;
  blocks_.resize(static_cast<std::size_t>(world_size));
  for (int i = 0; i < world_size; ++i) blocks_[i] = quotient + (i < remainder ? 1 : 0);
  pos_.resize(blocks_.size());
  scratch_.resize(blocks_.size());
  recompute_positions();
}

void Partitions::recompute_positions() {
  std::int64_t p = 0;
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    pos_[i] = p;
    p += blocks_[i];
  }
}

ElementRange Partitions::range(int j) const {
  EXDYNA_CHECK_ARG(j >= 0 && j < size(), "partition ", j, " outside [0, ", size(), ")");
  ElementRange r;
  r.begin = pos_[j] * layout_.block_size;
  r.end = j + 1 == size() ? layout_.n_g : (pos_[j] + blocks_[j]) * layout_.block_size;
  return r;
}

int Partitions::partition_of_block(std::int64_t b) const {
  // Positions are sorted; the partition is the last one starting at or before b.
  const auto it = std::upper_bound(pos_.begin(), pos_.end(), b);
  return static_cast<int>(it - pos_.begin()) - 1;
}

int Partitions::adjust_paper(std::span<const std::int64_t> counts_by_worker, std::int64_t t_prev) {
  const int n = size();
  EXDYNA_CHECK_ARG(static_cast<int>(counts_by_worker.size()) == n, "Alg. 3 got ",
                   counts_by_worker.size(), " counts; expected one per worker (", n, ")");
  // Lines 2-6: worker i selected from partition ((t-1) % n + i) % n.
  std::int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    scratch_[allocation(t_prev, i, n)] = counts_by_worker[i];
    total += counts_by_worker[i];
  }
  auto& k = scratch_;
  // Lines 7-8 with DESIGN's integer mean; k_move is the same for every pair.
  const std::int64_t pk_prev = total / n;
  // With ExDyna every worker sends at least one index, so k' >= n and pk_prev >= 1; a zero mean
  // (only from hand-made input) carries no information about imbalance.
  if (pk_prev <= 0) return 0;
  const double den_prev = static_cast<double>(total) / static_cast<double>(layout_.n_g);
  const auto k_move = static_cast<std::int64_t>(std::floor(
      static_cast<double>(blk_move_) * static_cast<double>(layout_.block_size) * den_prev));
  const double pk = static_cast<double>(pk_prev);
  int moved = 0;
  for (int i = 0; i + 1 < n; ++i) {
    const double det = static_cast<double>(k[i]) / pk;
    const double det2 = static_cast<double>(k[i + 1]) / pk;
    if (det > alpha_ && det2 < 1.0 / alpha_) {
      // Lines 14-16: `continue` skips this pair; the next pair still sees the unchanged counts.
      if (static_cast<double>(blocks_[i] - blk_move_) < min_blk_) continue;
      blocks_[i] -= blk_move_;
      blocks_[i + 1] += blk_move_;
      pos_[i + 1] -= blk_move_;
      k[i] -= k_move;
      k[i + 1] += k_move;
      ++moved;
    }
    // det and det2 were taken before the move, so at most one of the two branches runs.
    if (det < 1.0 / alpha_ && det2 > alpha_) {
      if (static_cast<double>(blocks_[i + 1] - blk_move_) < min_blk_) continue;
      blocks_[i] += blk_move_;
      blocks_[i + 1] -= blk_move_;
      pos_[i + 1] += blk_move_;
      k[i] += k_move;
      k[i + 1] -= k_move;
      ++moved;
    }
  }
  return moved;
}

void BlockLayout::count_per_block(std::span<const std::uint32_t> indices,
                                  std::span<std::uint32_t> hits) const {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(hits.size()) == n_blocks, "block counts of ",
                   hits.size(), " entries; expected n_b = ", n_blocks);
  if (indices.empty()) return;
  std::uint32_t cur = block_of_u32(indices[0]);
  // The current block's index range [lo, hi): most indices fall in it, one compare each.
  std::uint64_t lo = static_cast<std::uint64_t>(cur) * static_cast<std::uint64_t>(block_size);
  std::uint64_t hi = static_cast<std::int64_t>(cur) + 1 == n_blocks
                         ? std::uint64_t{1} << 33
                         : lo + static_cast<std::uint64_t>(block_size);
  std::uint32_t run = 0;
  for (const std::uint32_t i : indices) {
    if (i >= lo && i < hi) {
      ++run;
      continue;
    }
    hits[cur] += run;
    cur = block_of_u32(i);
    lo = static_cast<std::uint64_t>(cur) * static_cast<std::uint64_t>(block_size);
    hi = static_cast<std::int64_t>(cur) + 1 == n_blocks
             ? std::uint64_t{1} << 33
             : lo + static_cast<std::uint64_t>(block_size);
    run = 1;
  }
  hits[cur] += run;
}

void Partitions::balance_exact(std::span<const double> block_weights) {
  const int n = size();
  const std::int64_t nb = layout_.n_blocks;
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(block_weights.size()) == nb, "exact balance got ",
                   block_weights.size(), " block weights; expected n_b = ", nb);
  double total = 0;
  for (double w : block_weights) total += w;
  if (!(total > 0)) return;  // nothing selected: no information, keep the partitions
  // Every partition needs at least m blocks (the smallest integer >= min_blk, and at least 1).
  const std::int64_t m = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(min_blk_)));
  // Walk the prefix sums once; partition j ends at the block boundary e whose prefix weight is
  // closest to (j+1) * total / n, clamped so that this and every later partition keep m blocks.
  std::int64_t start = 0;  // first block of partition j
  std::int64_t e = 0;      // candidate end (exclusive), monotone over j
  double prefix = 0;       // sum of weights of blocks [0, e)
  for (int j = 0; j + 1 < n; ++j) {
    const double target = total * static_cast<double>(j + 1) / static_cast<double>(n);
    const std::int64_t lo = start + m;
    const std::int64_t hi = nb - static_cast<std::int64_t>(n - 1 - j) * m;
    while (e < lo) prefix += block_weights[e++];
    while (e < hi && prefix + block_weights[e] <= target) prefix += block_weights[e++];
    // Here prefix(e) <= target < prefix(e+1), unless clamped; take the closer boundary.
    if (e < hi && prefix < target) {
      const double next = prefix + block_weights[e];
      if (next - target < target - prefix) prefix += block_weights[e++];
    }
    blocks_[j] = e - start;
    start = e;
  }
  blocks_[n - 1] = nb - start;
  recompute_positions();
}

void Partitions::set_blocks(std::span<const std::int64_t> blk_part) {
  EXDYNA_CHECK_ARG(static_cast<int>(blk_part.size()) == size(), "partition state has ",
                   blk_part.size(), " partitions; expected ", size());
  std::int64_t sum = 0;
  for (auto b : blk_part) {
    EXDYNA_CHECK_ARG(b >= 1, "partition of ", b, " blocks is not valid; expected >= 1");
    sum += b;
  }
  EXDYNA_CHECK_ARG(sum == layout_.n_blocks, "partition sizes sum to ", sum,
                   " blocks; expected n_b = ", layout_.n_blocks);
  std::copy(blk_part.begin(), blk_part.end(), blocks_.begin());
  recompute_positions();
}

}  // namespace exdyna::sparsifiers
