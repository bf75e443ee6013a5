// Cyclic local top-k, CLT-k (Chen et al., "ScaleCom: Scalable Sparsified Gradient Compression for
// Communication-Efficient Distributed Training", NeurIPS 2020): in iteration t only the leader,
// worker t mod n, selects: it takes the top k = floor(d n_g) of its own acc (exact, see
// core/topk_select.hpp) and broadcasts the k indices; every worker then all-reduces acc at them.
//
// Invariants: the index set is the leader's and nobody else's, so no index is ever selected by two
// workers (no gradient build-up by construction): k' = k_unique = k and the actual density is
// exactly d. The other workers only wait during the selection (the idling the paper criticises).
// Collectives, in this order on every rank: broadcast (k indices), allreduce_sum (k values).
// Statistics: k_per_worker holds k for the leader and 0 for the others; nothing is padded (f = 1).
#pragma once

#include "exdyna/core/topk_select.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

class CltK final : public Sparsifier {
 public:
  explicit CltK(const SparsifierConfig& cfg,
                core::TopkMethod method = core::TopkMethod::kNthElement);
  std::string_view name() const override { return "cltk"; }
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  std::string fingerprint() const override;
  // State: the iteration counter, which picks the leader.
  std::vector<std::byte> save_state() const override;
  void load_state(std::span<const std::byte> state) override;
  std::int64_t iteration() const { return iteration_; }
  int leader(int world_size) const { return static_cast<int>(iteration_ % world_size); }

 private:
  SparsifierConfig cfg_;
  core::TopkMethod method_;
  std::int64_t iteration_ = 0;
  core::TopkScratch scratch_;
};

}  // namespace exdyna::sparsifiers
