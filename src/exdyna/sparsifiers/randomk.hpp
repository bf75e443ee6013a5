// Random-k sparsification (Stich, Cordonnier & Jaggi, "Sparsified SGD with Memory", NeurIPS 2018;
// Wangni et al. 2018): in iteration t every worker takes the same k = floor(d n_g) indices, drawn
// uniformly without replacement from [0, n_g), and the workers all-reduce acc at them. Error
// feedback keeps what was not sent, as for every sparsifier here.
//
// Choices where the papers leave room (also in docs): the indices are a pure function of
// (seed, t) with seed = --randomk-seed (SparsifierConfig::randomk.seed), drawn on every rank from
// the same SplitMix64 stream, so no index travels (no all-gather, no broadcast) and every rank
// holds the identical set; the values of the k indices are all-reduced (k floats). The draw is
// Floyd's algorithm (each k-subset equally likely) with Lemire's unbiased bounded integers, and the
// indices are returned sorted ascending.
//
// Invariants: exactly k distinct indices per iteration, identical on every rank, independent of
// acc; no build-up and no padding (k' = k_unique = k, f(t) = 1).
// Collectives, on every rank: allreduce_sum (k values).
// Statistics: k_per_worker holds k for every worker (each contributes k values to the all-reduce),
// density = k / n_g (the indices are shared, not summed), as dense reports its n_g.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

// The k indices of iteration t for seed: sorted ascending, distinct, in [0, n_g). The same on
// every rank and platform. mark is scratch of n_g bits (resized here, left all false).
void randomk_indices(std::uint64_t seed, std::int64_t iteration, std::int64_t n_g, std::int64_t k,
                     std::vector<Index>& out, std::vector<bool>& mark);

class RandomK final : public Sparsifier {
 public:
  explicit RandomK(const SparsifierConfig& cfg);
  std::string_view name() const override { return "randomk"; }
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  std::string fingerprint() const override;
  // State: the iteration counter (the next draw is a function of it and the seed).
  std::vector<std::byte> save_state() const override;
  void load_state(std::span<const std::byte> state) override;
  std::int64_t iteration() const { return iteration_; }

 private:
  SparsifierConfig cfg_;
  std::int64_t iteration_ = 0;
  std::vector<bool> mark_;
};

}  // namespace exdyna::sparsifiers
