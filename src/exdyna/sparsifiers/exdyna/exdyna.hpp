// ExDyna (paper Algorithm 1 with Algorithms 2-5): exclusive, dynamically re-balanced partitions of
// the gradient vector, one per worker, each scanned against one shared threshold that is scaled
// online towards the user's density.
//
// One step, in the same order on every rank:
//   1. worker r selects from partition (t mod n + r) mod n: every |acc| >= (float)threshold
//      (Alg. 4); a worker whose partition yields nothing sends exactly one index,
//      (t mod partition length) + partition start, so no collective sees an empty buffer;
//   2. allgather_counts of k_i, allgather_list of the indices (padded by default, as the paper),
//      allreduce_sum of acc at the gathered indices (concatenated in rank order);
//   3. the next threshold from k and k' = sum k_i (Alg. 5), and the next partitions from the
//      counts re-ordered to partitions (Alg. 3).
// Invariants: partitions are disjoint and cover [0, n_g), so no index is selected by two workers
// (no gradient build-up) and the gathered list has no duplicates; every rank holds the same
// threshold and partitions after every step (they are functions of gathered data only).
//
// Beyond the paper, each usable alone: ExDynaOptions::controller = kHistogram (the
// next threshold from a ladder of counts gathered with k_i) or kExact (this iteration's selection
// cut to exactly k from that ladder, with an optional per-worker cap), and
// ExDynaOptions::balance = kExact (see docs/controller.md). With both set to kPaper the
// decisions are bit-for-bit those of Algorithms 1-5 with the authors' defaults
// (docs/controller.md, "Where the paper is silent").
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "exdyna/core/scratch_buffer.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"
#include "exdyna/sparsifiers/exdyna/threshold.hpp"
#include "exdyna/sparsifiers/resident_step.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

class ExDyna final : public Sparsifier {
 public:
  // Validates cfg (throws InvalidArgument naming the bad option).
  explicit ExDyna(const SparsifierConfig& cfg);

  std::string_view name() const override { return "exdyna"; }
  // The bytes a step's all-gathers count under bound cfg, for estimates made before a step (the
  // DDP hook's min_compression_rate): the counts (8 bytes a rank with the paper controller, else
  // the ladder's slot and the timing word it may carry) and the indices (4 k bytes at f(t) = 1;
  // under a worker cap, where counts and indices may travel fused, each rank's slot of cap
  // indices).
  static std::int64_t gather_bytes(const SparsifierConfig& cfg);
  // StepStats::times.select_cpu of a step is the sum of this many laps of the thread CPU clock
  // (before and after the counts all-gather; the exact controller's cold step has a third), in
  // paper mode and with the exact controller alike: `exdyna bench select` nets out their cost.
  static constexpr int kSelectCpuLaps = 2;
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  // On a device-resident gradient (exdyna_device.cpp): the paper and exact controllers with
  // float32 values, the same decisions as step() on the same gradient.
  bool runs_on_device() const override;
  void step_device(const float* acc, DeviceStep& device, comm::Communicator& comm,
                   StepStats& stats) override;
  // The exact controller under a worker cap with the fused all-gather and float32 values, from
  // iteration 1 on (iteration 0's cold ladder gathers a maximum first: step_device), with every
  // pass of the step left on the device (resident_step.hpp; exdyna_resident.cpp). The decisions
  // are step()'s fused step's, but for the rule resident_step.hpp states where the cap yields.
  // The host's state for the next step (threshold, partitions, the ladder's reach) follows from
  // the step's read-back data at the start of the next step_resident, or in finish_resident; so
  // stats receives the statistics of the step finished then, one step late (a default StepStats
  // where none was pending).
  bool runs_resident() const;
  void step_resident(const float* acc, ResidentStep& device, comm::Communicator& comm,
                     StepStats& stats);
  // Finishes the pending resident step, if any, into stats. save_state, step and step_device
  // refuse while one is pending.
  void finish_resident(ResidentStep& device, StepStats& stats);
  bool resident_pending() const { return resident_pending_; }
  std::string fingerprint() const override;
  std::vector<std::byte> save_state() const override;
  void load_state(std::span<const std::byte> state) override;

  // State for the next step (identical on every rank).
  double threshold() const { return threshold_; }
  const sparsifiers::Partitions& partitions() const { return parts_; }
  std::int64_t iteration() const { return iteration_; }
  std::int64_t k() const { return k_; }
  // Histogram controller (null in paper mode) and exact balance's smoothed per-block counts
  // (empty in paper mode or before the first step).
  const sparsifiers::HistogramController* histogram() const { return hist_ ? &*hist_ : nullptr; }
  std::span<const double> block_load() const { return block_load_; }
  // Ladder controllers: the lowest rung of this worker's ladder that its last count slot held
  // (sparsifiers/exdyna/ladder_wire.hpp; 0: the whole ladder, also before the first step and in
  // paper mode).
  int slot_lowest_rung() const { return slot_lowest_rung_; }
  // The exact controller: the rung of the last step's ladder from which this worker collected
  // its candidates (0: the whole ladder; floor_rung).
  int floor_rung() const { return floor_; }

  // Exact balance smooths each block's share of the selections over iterations:
  // load = (1 - w) load + w share, so a partition's share is not steered by one iteration's
  // Poisson noise (see docs/controller.md for the measured choice).
  static constexpr double kBalanceWeight = 0.5;
  // Two passes pay when the candidates are at least this share of the partition (measured on the
  // LSTM trace, docs/controller.md): below, writing them costs less than
  // reading the partition twice.
  static constexpr double kTwoPassShare = 0.15;
  // --fuse auto: every this many iterations a step takes the two all-gathers again, so the
  // measured latency and bandwidth that choose between the paths stay current.
  static constexpr std::int64_t kFuseProbeEvery = 32;
  // Whether the next step sends counts and indices in one all-gather (fused_gather.hpp), and the
  // cost estimates --fuse auto decides from (0: not measured yet): one small all-gather's seconds
  // and the seconds per gathered byte, identical on every rank (from gathered timings).
  bool fuse_next() const { return fuse_next_; }
  double fuse_latency() const { return fuse_latency_; }
  double fuse_seconds_per_byte() const { return fuse_per_byte_; }

 private:
  // The exact controller's first ladder (sparsifiers::cold_ladder) from the global max |acc|: one
  // extra all-gather of 8 bytes per rank, in iteration 0 only.
  sparsifiers::LadderGrid cold_grid(float own_max_abs, comm::Communicator& comm);
  // The start and end of a step, shared by step() and step_device(): the checks, this worker's
  // partition and the step's fixed statistics; then, once the values are exchanged, the
  // statistics of the counts, the next threshold (Alg. 5) and the next partitions (Alg. 3, or
  // exact balance from block_hits_, which the caller has counted).
  sparsifiers::ElementRange begin_step(const comm::Communicator& comm, std::int64_t acc_size,
                                       StepStats& stats);
  void end_step(const sparsifiers::LadderGrid& grid, std::size_t per_rank, bool cold,
                std::int64_t gathered, StepStats& stats);
  // After the cold iteration under a worker cap: the next ladders' reach below the threshold
  // covers the deepest worker's cut (per_rank: the count all-gather's entries per rank).
  void cold_cap_reach(const sparsifiers::LadderGrid& grid, std::size_t per_rank);
  // The lowest rung any worker's own cut reached in this step's gathered ladders (workers whose
  // ladder holds fewer than their count are skipped: they took everything).
  int deepest_cut_rung(int rungs, std::size_t per_rank) const;
  // Worker w's own cut rung in this step's gathered ladders (none where it holds less than its
  // count: it sent one index from an empty ladder); with `times`, the rung at which its ladder
  // holds times its count (predicted_cut's cover).
  std::optional<int> gathered_cut(int w, int rungs, std::size_t per_rank,
                                  std::int64_t times = 1) const;
  // Alg. 1 line 11: all-gathers this worker's count (and ladder) into gather_all_ (per rank: the
  // count, then the R bins) and sums the ladders into summed_bins_; fused: in the fused slot
  // (fused_mine_, its list packed by pack_own_list), with every rank's list into fused_all_.
  void gather_counts(std::int64_t mine, comm::Communicator& comm, bool fused = false);
  // Every rank's count and ladder from the gathered slots (`stride` words apart) into
  // gather_all_, this worker's own decoded ladder into bins_, and their sum into summed_bins_.
  void decode_gathered(std::span<const std::int64_t> recv, std::size_t stride);
  // The resident step's fixed shapes.
  ResidentShape resident_shape() const;
  // The fused all-gather (exdyna_fused.cpp). Before it: this worker's cut of its min(cap,
  // candidates) largest candidates (collected first if two passes stored none), with their places
  // in the cut's order, into fused_mine_. After it and the plan: whether every worker's list holds
  // its planned count, and then the gathered selection (as the index all-gather would give it)
  // into indices.
  void pack_own_list(std::span<const float> acc, std::span<const float> part, std::uint32_t offset,
                     const sparsifiers::LadderGrid& grid, std::int64_t candidates);
  bool fused_lists_hold() const;
  void unpack_lists(std::vector<Index>& indices) const;
  // --fuse auto: the gathered timings of the last two-collective step into the cost estimates,
  // and the choice for the next step (from this step's counts).
  void read_fuse_timings();
  // --fuse auto, after a two-collective step: this worker's seconds in its two all-gathers, sent
  // with the next step's counts.
  void note_gather_times(double counts_seconds, double list_seconds);
  // Whether each count slot carries the timing word (--fuse auto under a cap).
  bool sends_timings() const { return wire_mine_.size() > ladder_words_; }
  bool choose_fuse() const;
  // The bytes the index all-gather of counts_ gathers (padded or exact, as configured).
  double index_gather_bytes() const;
  // --balance exact: the smoothed per-block load from this step's block counts (block_hits_, of
  // `gathered` indices), then the partition boundaries that equalise it.
  void balance_exact(std::int64_t gathered);
  // The selection pass of the ladder controllers into idx_/abs_ and bins_ (bins cleared first):
  // the histogram controller's selection, the exact controller's candidates, or with two_pass
  // only their count and bins (and group_max_). Returns the count of selected or candidates.
  std::size_t ladder_pass(std::span<const float> part, std::uint32_t offset,
                          const sparsifiers::LadderGrid& grid, float thr, bool two_pass);
  // The exact controller, before the counts all-gather, while the partition and the candidates
  // are in cache: under a binding cap a worker sends at most the cap unless the cap yields, so it
  // stores only the candidates from the bin of its cap-th largest value up (stored_from_): one
  // pass reduces its words to them, two passes collect them now instead of after the plan.
  // Returns how many are stored (two passes without a binding cap: none, kNoneStored).
  std::size_t store_capped(std::span<const float> part, std::uint32_t offset,
                           const sparsifiers::LadderGrid& grid, bool two_pass,
                           std::size_t candidates);
  static constexpr int kNoneStored = 1 << 30;
  // The exact controller, after the plan (counts_): this worker's own cut of its stored_
  // candidates (with two_pass, collected first from its cut rung); returns the values kept,
  // counts_[rank].
  std::size_t own_cut(std::span<const float> part, std::uint32_t offset,
                      const sparsifiers::LadderGrid& grid, bool two_pass);
  // The sub-bins of collect_ladder_words' candidates (abs_'s bytes: the words path stores no |x|).
  std::uint8_t* word_subs() { return reinterpret_cast<std::uint8_t*>(abs_.data()); }
  // The exact controller: whether the next step counts its candidates first and collects only
  // those at or above its own cut after the plan (sparsifiers::count_ladder_candidates), from this
  // step's gathered candidate counts. The decisions are the same either way; only the cost
  // differs.
  bool next_two_pass(std::int64_t t, std::size_t per_rank) const;
  // The worker that read, in step t, the partition this worker reads in step t + 1 (none if the
  // rotation does not hand it over).
  std::optional<int> next_partition_holder(std::int64_t t) const;
  // The exact controller under a worker cap: the rung of this step's grid from which
  // this worker collects its candidates (0: the whole ladder), from next_cut_; the grid from
  // that rung on; and, at the end of a step, the value of the cut that the partition this worker
  // reads next needed in this step (0: none known).
  int floor_rung(const sparsifiers::LadderGrid& grid) const;  // the floor of the step under way
  sparsifiers::LadderGrid from_floor(const sparsifiers::LadderGrid& grid) const;
  // The values of the cut that the partition this worker reads next needed in this step, and of
  // the rung above which it held kCoverFactor times that count (0: not known).
  struct PredictedCut {
    double cut = 0;
    double cover = 0;
  };
  static constexpr std::int64_t kCoverFactor = 4;
  PredictedCut predicted_cut(const sparsifiers::LadderGrid& grid, std::size_t per_rank,
                             std::int64_t t) const;
  // Alg. 5 or the ladder controllers: the next step's threshold and reach (cold: this step used
  // the cold ladder; stats: this step's, counts finished).
  void plan_next_threshold(const sparsifiers::LadderGrid& grid, std::size_t per_rank, bool cold,
                           StepStats& stats);

  SparsifierConfig cfg_;
  std::int64_t k_;
  sparsifiers::Partitions parts_;
  double threshold_;
  std::int64_t iteration_ = 0;
  std::vector<std::int64_t> prev_counts_;  // k_i of the last step, in worker order
  std::optional<sparsifiers::HistogramController> hist_;
  std::vector<double> block_load_;  // exact balance: smoothed selections per block

  // Per-step buffers, kept between steps so the steady state does not allocate.
  // This worker's selection (or candidates), and the candidates' |acc| (exact controller and
  // ladders): room for a partition of all n_g elements, untouched until written.
  core::ScratchBuffer<Index> idx_;
  std::vector<std::int64_t> gather_mine_;  // count and bins of this worker (1 + R, or 1)
  std::vector<std::int64_t> gather_all_;   // the same, of every worker, as decoded
  std::vector<std::int64_t>
      wire_mine_;  // with a ladder: the slot sent (sparsifiers/exdyna/ladder_wire.hpp)
  std::vector<std::int64_t> wire_all_;  // and every rank's slot, gathered
  int slot_lowest_rung_ = 0;
  std::vector<std::int64_t> counts_;
  std::vector<std::int64_t> bins_;         // this worker's ladder bins
  std::vector<std::int64_t> summed_bins_;  // over all workers
  std::vector<std::uint32_t> block_hits_;  // this step's selections per block
  core::ScratchBuffer<float> abs_;
  std::vector<std::int64_t> plan_scratch_;  // exact controller: plan_worker_counts' scratch
  std::int64_t worker_cap_ = 0;             // exact controller: most values per worker, 0: none
  std::vector<std::uint8_t> group_max_;     // exact controller, two passes: per group of 64 values
  bool two_pass_next_ = false;              // exact controller: next_two_pass for the next step
  std::size_t stored_ = 0;  // exact controller: the candidates stored (store_capped)
  int stored_from_ = 0;     // exact controller: the lowest rung whose candidates are all stored
  bool words_ = false;      // exact controller: this step's candidates are collect_ladder_words'
  int floor_ = 0;           // exact controller: this step's floor_rung
  PredictedCut next_cut_;   // exact controller: predicted_cut of the last step (state)

  // The fused all-gather (exact controller under a cap; fused_gather.hpp).
  std::size_t ladder_words_ = 0;  // the ladder's slot; then the timing word under --fuse auto
  FusedLayout fused_layout_;
  std::vector<std::int64_t> fused_mine_, fused_all_;
  std::vector<Index> fused_idx_;  // the stored candidates, copied for the cut (it works in place)
  std::vector<float> fused_abs_;
  std::vector<std::uint8_t> fused_subs_;
  std::vector<std::uint32_t> fused_keys_;
  std::vector<std::uint64_t> fused_scratch_;
  bool fuse_next_ = false;   // the next step's choice (identical on every rank)
  bool fused_sent_ = false;  // this step sent the fused slot
  // --fuse auto: this worker's seconds of the count and index all-gathers in its last
  // two-collective step, packed as microseconds (0: none to send), and the bytes that index
  // all-gather gathered; the estimates from every rank's.
  std::int64_t my_timing_ = 0;
  double timed_bytes_ = 0;
  double fuse_latency_ = 0, fuse_per_byte_ = 0;

  // The resident step (exdyna_resident.cpp): whether one awaits finish_resident, its grid and its
  // statistics so far, and every worker's one index.
  // The resident step's slot: the fused all-gather's, or on one worker (no cap: one worker sends
  // all k) a slot of the ladder and k indices; cap 0 where it cannot run.
  FusedLayout resident_layout_;
  bool resident_pending_ = false;
  sparsifiers::LadderGrid resident_grid_;
  StepStats resident_stats_;
  std::vector<Index> resident_one_;
};

}  // namespace exdyna::sparsifiers
