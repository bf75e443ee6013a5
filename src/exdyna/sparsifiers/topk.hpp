// Top-k sparsification with error feedback (Aji & Heafield 2017; Alistarh et al., "The
// Convergence of Sparsified Gradient Methods", NeurIPS 2018): each worker selects the k = floor(d
// n_g) elements of largest |acc| of its WHOLE accumulated gradient (exact top-k, see
// core/topk_select.hpp for the tie-break that makes the choice unique), the workers all-gather
// counts and index lists, take the union, and all-reduce acc at the union.
//
// Invariants: every worker sends exactly k indices, so the padded all-gather carries no padding
// (f(t) = 1); the union holds between k and n k indices: workers that pick the same index build
// up (the gradient build-up problem of the paper, Sec. 2), so the actual density k_unique / n_g
// may exceed d, and the values all-reduced are the k_unique sums.
#pragma once

#include "exdyna/core/topk_select.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparse_exchange.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

class TopK final : public Sparsifier {
 public:
  explicit TopK(const SparsifierConfig& cfg,
                core::TopkMethod method = core::TopkMethod::kNthElement);
  std::string_view name() const override { return "topk"; }
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  std::string fingerprint() const override;
  // State: the iteration counter.
  std::vector<std::byte> save_state() const override;
  void load_state(std::span<const std::byte> state) override;
  std::int64_t iteration() const { return iteration_; }

 private:
  SparsifierConfig cfg_;
  core::TopkMethod method_;
  std::int64_t iteration_ = 0;
  std::vector<Index> mine_;
  core::TopkScratch scratch_;
  ExchangeBuffers bufs_;
};

}  // namespace exdyna::sparsifiers
