// Ok-Topk (Li and Hoefler, "Near-Optimal Sparse Allreduce for Distributed Deep Learning", PPoPP
// 2022): a sparse all-reduce whose volume stays below 6k words however many workers take part,
// with thresholds reused between exact re-evaluations so that selecting costs one pass.
//
// One step at iteration t on worker i (P workers, k = floor(d n_g), acc_i its accumulated
// gradient):
//  1. Local selection. When t mod period == 0 the local threshold th_i is re-evaluated exactly
//     (the exact top-k of acc_i; th_i = its smallest |acc|); otherwise it is reused:
//     L_i = {j : |acc_ij| >= th_i}. If more than 4k/3 pass, th_i is raised by 3 % and the count
//     redone, at most 5 times; after the step th_i /= 1.012 if |L_i| < 2k/3 and *= 1.012 if
//     |L_i| > 5k/4. (The paper says only "reused"; the corrections are those of the authors'
//     published code.)
//  2. Space repartition, when t mod repartition == 0: each worker proposes the P - 1 boundaries
//     that cut L_i into P equal counts, and the boundaries become the mean of the proposals (one
//     all-reduce of P - 1 values). Region r = [B_r, B_{r+1}) belongs to worker r.
//  3. Sparse reduce-scatter: worker i sends (j, acc_ij) for j in L_i and region r to worker r (one
//     all-to-all; MPI's and Gloo's all-to-all send to rank i + s in round s, the destination
//     rotation the paper asks for). Worker r sums, in rank order, what it receives: reduced_r[j] =
//     the sum of acc_wj over the workers w with j in L_w.
//  4. Global selection. When t mod period == 0: every reduced entry is all-gathered and every
//     worker takes their exact top-k; the global threshold th_g becomes its smallest |sum|.
//     Otherwise worker r keeps its entries with |sum| >= th_g, and after the step th_g /= 1.008
//     if fewer than 2k/3 were kept in all, *= 1.008 if more than 4k/3 (the authors' code).
//  5. Balance and all-gather. With the padded all-gather (--gather padded, the default) the
//     owners first even out their counts: an all-to-all moves each kept entry to the rank that
//     holds its position in the global order, so every rank then sends the same count and nothing
//     is padded. With --gather exact (allgatherv) imbalance costs no bytes, so the balancing is
//     skipped, as in the authors' code. Then the (index, sum) records are all-gathered: the
//     result, sorted by index, identical on every rank.
// Error feedback: worker i's residual keeps acc_i except at L_i and the global selection
// (SparseResult::partial and sent): what it selected but the global selection dropped stays in its
// residual, as in the paper.
//
// Volume per worker on a step that reuses the thresholds, with |L_i| <= k and k kept: at most k
// records out in the reduce-scatter, at most k in the balancing, k gathered: 6k words of 4 bytes
// (a record is an index and a value). A re-evaluation step all-gathers every reduced entry (up to
// P k records), once every `period` steps.
//
// With --values fp16|bf16 the records carry 16-bit values: worker i sends round(acc_ij) (its
// rounding error stays in its residual) and the owners' sums are rounded again for the
// all-gather (shared by every worker, not fed back).
//
// Statistics: threshold = th_g used in the step; k_per_worker = each rank's share of the final
// all-gather (so f(t) measures its padding) on steps that reuse the thresholds, each owner's share
// of the selection on re-evaluation steps; times: select (local and global selection, the exact
// top-ks), allreduce (the sparse reduce-scatter and the summing), allgather (balance and
// all-gather, counts included), other (repartition).
// State: iteration, both thresholds and the boundaries.
#pragma once

#include <cstdint>
#include <vector>

#include "exdyna/core/topk_select.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparse_exchange.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

// The records on the wire: an index and its value in float32 (8 bytes), or in a 16-bit format
// (6 bytes: the index as two halves keeps the record unpadded).
struct OkTopkRecord32 {
  Index index;
  float value;
};
struct OkTopkRecord16 {
  std::uint16_t index_lo, index_hi, bits;
};

class OkTopk final : public Sparsifier {
 public:
  explicit OkTopk(const SparsifierConfig& cfg);
  std::string_view name() const override { return "oktopk"; }
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  std::string fingerprint() const override;
  std::vector<std::byte> save_state() const override;
  void load_state(std::span<const std::byte> state) override;

  double local_threshold() const { return local_th_; }
  double global_threshold() const { return global_th_; }
  // B_0 = 0 <= B_1 <= ... <= B_P = n_g: region r is [B_r, B_{r+1}).
  const std::vector<std::int64_t>& boundaries() const { return bounds_; }
  std::int64_t iteration() const { return iteration_; }

 private:
  template <typename Rec>
  struct Buffers {
    std::vector<Rec> send, recv, balanced, gathered;
  };

  template <typename Rec>
  void step_with(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                 StepStats& stats, Buffers<Rec>& b);
  void select_local(std::span<const float> acc, bool reevaluate);
  void repartition(comm::Communicator& comm);
  template <typename Rec>
  void reduce_scatter(std::span<const float> acc, comm::Communicator& comm, Buffers<Rec>& b);
  template <typename Rec>
  void select_global_exact(comm::Communicator& comm, SparseResult& out, StepStats& stats,
                           Buffers<Rec>& b);
  template <typename Rec>
  void select_global_reused(comm::Communicator& comm, SparseResult& out, StepStats& stats,
                            Buffers<Rec>& b);
  void finish(SparseResult& out);

  SparsifierConfig cfg_;
  std::int64_t iteration_ = 0;
  double local_th_ = 0;  // 0 until the first re-evaluation
  double global_th_ = 0;
  std::vector<std::int64_t> bounds_;  // P + 1 boundaries, even until the first repartition
  std::vector<Index> mine_;           // L_i, ascending
  std::vector<std::int64_t> send_counts_, recv_counts_, counts_;
  std::vector<double> proposal_;    // the repartition's proposed boundaries
  std::vector<Index> recv_idx_;     // indices received in the reduce-scatter, per sender
  std::vector<Index> reduced_idx_;  // this owner's reduced entries, ascending
  std::vector<float> reduced_val_;
  std::vector<float> dense_;  // n_g zeros, touched entries reset after each sum
  std::vector<Index> merge_scratch_;
  std::vector<std::size_t> run_bounds_;
  std::vector<float> mags_;
  std::vector<std::uint32_t> picked_;  // positions of the global exact top-k
  std::vector<Index> cand_;            // n_g: what passes the reused local threshold
  core::TopkScratch topk_;
  Buffers<OkTopkRecord32> b32_;
  Buffers<OkTopkRecord16> b16_;
};

}  // namespace exdyna::sparsifiers
