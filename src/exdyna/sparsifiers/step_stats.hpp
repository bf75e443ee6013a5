// Per-step statistics every sparsifier reports (the measurements of the paper).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "exdyna/comm/byte_counts.hpp"

namespace exdyna::sparsifiers {

// Wall-clock seconds of each phase of one step.
struct PhaseTimes {
  double accumulate = 0;  // error feedback: acc = residual + grad
  double select = 0;      // choosing indices (threshold scan, top-k, estimate)
  double allgather = 0;   // counts + indices
  double allreduce = 0;   // values (or the dense vector)
  double broadcast = 0;   // CLT-k
  double update = 0;      // scatter of the averaged update, residual zeroing
  double other = 0;       // partition allocation, threshold scaling, bookkeeping
  double cpu = 0;  // CPU time of the stepping thread over the whole step (set by the sim driver)
  // Of `cpu`, the part spent inside collectives (Communicator::cpu_seconds; set by the sim
  // driver): cpu - cpu_comm is the step's own work, what a faster network would not shorten.
  double cpu_comm = 0;
  // CPU time of the stepping thread in `select` (every sparsifier sets it): a worker's own
  // selection work, which ranks sharing fewer cores than they are do not inflate.
  double select_cpu = 0;
  double non_comm() const { return accumulate + select + update + other; }
};

struct StepStats {
  std::int64_t iteration = 0;
  int world_size = 1;
  std::int64_t n_g = 0;
  std::int64_t k_target = 0;  // k = floor(d * n_g)
  double target_density = 0;
  // Threshold used in this iteration (NaN for sparsifiers without one).
  double threshold = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::int64_t> k_per_worker;  // k_i: count worker i sent
  std::int64_t k_total = 0;                // k' = sum k_i
  std::int64_t k_unique = 0;               // distinct indices after the union
  double density = 0;                      // actual density d' = k' / n_g
  double density_error = 0;                // Eq. 6: |k - k'| / n_g
  double f_t = 1;                          // Eq. 5: n * max k_i / k'
  std::int64_t padded_elements = 0;        // n * max k_i - k' (padded mode)
  double global_error = std::numeric_limits<double>::quiet_NaN();  // Eq. 1, of e_{i,t}
  // Partition bookkeeping (ExDyna); empty for sparsifiers without partitions.
  std::vector<int> alloc_per_worker;               // partition worker i selected from
  std::vector<std::int64_t> blocks_per_partition;  // blocks in partition j this iteration
  // This worker's own selection (ExDyna): the length of the partition it read, and with the
  // exact controller the candidates its pass counted (the values at or above its floor, which its
  // selection time grows with; 0 in the other modes).
  std::int64_t own_partition = 0;
  std::int64_t own_candidates = 0;
  // 1 when the counts and indices travelled in one all-gather (ExDyna's exact controller under a
  // worker cap, fused_gather.hpp), else 0.
  std::int64_t fused = 0;
  // 1 when some rank's gradient was not finite and non_finite = skip passed it on (the update is
  // NaN, nothing was selected, no state changed; non_finite_step.hpp), else 0.
  std::int64_t non_finite = 0;
  // The factor step_clip scaled the update by (1: not clipped; step_clipping.hpp).
  double step_scale = 1;
  comm::ByteCounts bytes;
  PhaseTimes times;

  // Fills k_total, density, density_error, f_t and padded_elements from k_per_worker.
  void finish_counts();
};

inline void StepStats::finish_counts() {
  k_total = 0;
  std::int64_t m = 0;
  for (auto k : k_per_worker) {
    k_total += k;
    m = k > m ? k : m;
  }
  const double ng = static_cast<double>(n_g > 0 ? n_g : 1);
  density = static_cast<double>(k_total) / ng;
  density_error =
      static_cast<double>(k_target > k_total ? k_target - k_total : k_total - k_target) / ng;
  const auto n = static_cast<std::int64_t>(k_per_worker.size());
  f_t = k_total > 0 ? static_cast<double>(n * m) / static_cast<double>(k_total) : 1.0;
  padded_elements = n * m - k_total;
}

}  // namespace exdyna::sparsifiers
