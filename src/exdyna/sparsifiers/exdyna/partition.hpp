// Block-based gradient vector partitioning (paper Alg. 2) and dynamic partition allocation
// (paper Alg. 3), plus the "exact balance" re-partitioning (ExDynaOptions::balance = kExact).
//
// The gradient vector [0, n_g) is cut into n_b blocks of sz_blk elements (sz_blk a multiple of 32
// so that every block starts on a 128-byte boundary); the remainder n_g - n_b * sz_blk belongs to
// the last block and therefore to the last partition. A partition is a run of contiguous blocks;
// partition j holds blocks [pos[j], pos[j] + blocks[j]).
//
// Invariants, kept by every operation here: pos[0] = 0, pos[j+1] = pos[j] + blocks[j],
// sum(blocks) = n_b, so the partitions cover [0, n_g) exactly and never overlap; no operation
// takes a partition below min_blk blocks (and none is ever empty).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace exdyna::sparsifiers {

// The block grid: how many blocks, how large, and why (the fallback for small n_g).
struct BlockLayout {
  std::int64_t n_g = 0;
  std::int64_t n_blocks = 0;    // n_b actually used
  std::int64_t block_size = 0;  // sz_blk
  // Non-empty when the requested n_b could not be used (n_g < 32 n_b); says what was done.
  std::string note;
  // Block holding element i (the remainder belongs to the last block).
  std::int64_t block_of(std::int64_t i) const {
    const std::int64_t b = i / block_size;
    return b < n_blocks ? b : n_blocks - 1;
  }
  // The same for 32-bit indices, without a division per call (exact: the estimate from the
  // reciprocal is off by at most one and corrected).
  std::uint32_t block_of_u32(std::uint32_t i) const {
    auto b = static_cast<std::int64_t>(static_cast<double>(i) * inv_block_size);
    const std::int64_t bs = block_size;
    if (b * bs > i) --b;
    if ((b + 1) * bs <= i) ++b;
    return static_cast<std::uint32_t>(b < n_blocks ? b : n_blocks - 1);
  }
  double inv_block_size = 0;  // 1 / block_size, set by make_block_layout

  // hits[b] += how many of `indices` lie in block b (hits has n_blocks entries). Counted in runs:
  // the gathered indices ascend within each rank's segment, and incrementing one counter in
  // memory for every index serialises on store-to-load forwarding (exact balance took 1.7 ns an
  // index at 4M gradients); the run's count stays in a register. Correct in any order.
  void count_per_block(std::span<const std::uint32_t> indices, std::span<std::uint32_t> hits) const;
};

// The authors' rule (docs/controller.md): sz_blk = floor(n_g / n_b) rounded down to a multiple
// of 32. When that is 0 (n_g < 32 n_b): n_b = max(n, floor(n_g / 32)); when blocks would still be
// under 32 elements, n_b = n blocks of floor(n_g / n). Throws InvalidArgument for n_g < n, n_b < n
// or n < 1.
BlockLayout make_block_layout(std::int64_t n_g, int world_size, std::int64_t n_blocks_requested);

struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};

class Partitions {
 public:
  // Alg. 2. min_blk < 0 selects the default n_b / (4 n) (a real number, with the n_b actually
  // used). Throws InvalidArgument for blk_move < 1, alpha <= 1, or a min_blk that the initial
  // partitions could not honour (min_blk > floor(n_b / n)).
  Partitions(const BlockLayout& layout, int world_size, double min_blk = -1,
             std::int64_t blk_move = 1, double alpha = 1.05);

  int size() const { return static_cast<int>(blocks_.size()); }
  const BlockLayout& layout() const { return layout_; }
  double min_blk() const { return min_blk_; }
  std::int64_t blk_move() const { return blk_move_; }
  double alpha() const { return alpha_; }
  std::span<const std::int64_t> blocks() const { return blocks_; }  // blk_part
  std::span<const std::int64_t> positions() const { return pos_; }  // blk_pos
  // Element range of partition j; the last one ends at n_g.
  ElementRange range(int j) const;
  // Partition of the first element of block b.
  int partition_of_block(std::int64_t b) const;

  // Alg. 3 line 29: the partition worker `rank` selects from in iteration t.
  static int allocation(std::int64_t t, int rank, int world_size) {
    const auto n = static_cast<std::int64_t>(world_size);
    return static_cast<int>((t % n + rank) % n);
  }

  // Alg. 3 lines 1-28. counts_by_worker[i] is the count worker i sent in iteration t_prev (when it
  // selected from partition allocation(t_prev, i)); they are re-ordered to partitions, then each
  // pair of neighbours (i, i+1) is inspected left to right, with the per-partition mean
  // floor(k'/n) and k_move = floor(blk_move * sz_blk * (k'/n_g)) carried into the next pair.
  // Returns the number of pairs that moved blocks.
  int adjust_paper(std::span<const std::int64_t> counts_by_worker, std::int64_t t_prev);

  // The exact balance: new boundaries such that every partition holds as close to an equal
  // share of sum(block_weights) as block granularity and min_blk allow; block_weights has n_b
  // entries. Deterministic (same input, same output on every rank); O(n_b + n).
  void balance_exact(std::span<const double> block_weights);

  // Replaces the partitions by blk_part (e.g. from a checkpoint); positions are recomputed.
  // Throws InvalidArgument unless the sizes sum to n_b and each is >= 1.
  void set_blocks(std::span<const std::int64_t> blk_part);

 private:
  void recompute_positions();

  BlockLayout layout_;
  double min_blk_;
  std::int64_t blk_move_;
  double alpha_;
  std::vector<std::int64_t> blocks_;
  std::vector<std::int64_t> pos_;
  std::vector<std::int64_t> scratch_;  // Alg. 3's temp, kept to avoid per-step allocation
};

}  // namespace exdyna::sparsifiers
