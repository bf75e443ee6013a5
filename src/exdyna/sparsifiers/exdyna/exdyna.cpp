#include "exdyna/sparsifiers/exdyna/exdyna.hpp"

#include "exdyna/sparsifiers/sparse_exchange.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iostream>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/reductions.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_wire.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"
#include "exdyna/sparsifiers/exdyna/threshold.hpp"

namespace exdyna::sparsifiers {

namespace {

const SparsifierConfig& validated(const SparsifierConfig& cfg) {
  cfg.validate();
  return cfg;
}

// A list of exactly `expected` entries (the state's count is checked against this sparsifier).
template <typename T>
std::vector<T> get_list_of(core::ByteReader& r, std::int64_t expected) {
  auto v = r.get_list<T>();
  EXDYNA_CHECK_T(DataError, static_cast<std::int64_t>(v.size()) == expected,
                 "exdyna state holds a list of ", v.size(), " entries; expected ", expected);
  return v;
}

// Alg. 3 moves blocks without knowing where the selections are, and min_blk = n_b / (4n) keeps
// its walk from emptying a partition. Exact balance places boundaries from the selections
// themselves; with the paper's min_blk a hot layer narrower than n_b / (4n) blocks cannot get a
// partition of its own share, and f(t) stays high (docs/controller.md: 1.37 instead of
// 1.03 on the synthetic source). So exact balance defaults to one block; an explicit min_blk is
// always honoured.
double effective_min_blk(const sparsifiers::ExDynaOptions& o) {
  return o.balance == sparsifiers::Balance::kExact && o.min_blk < 0 ? 1.0 : o.min_blk;
}

// The count all-gather's slot per rank, in int64 words, when a ladder rides with the count
// (sparsifiers/exdyna/ladder_wire.hpp): about 4 % of the index and value bytes (n slots of 8 bytes
// a word against about 8 k bytes per worker: k / (25 n) words); at least 24 words (192 bytes),
// which held every encoded ladder whole in the measured runs at d = 0.001 (synthetic 4M and the CNN
// and LSTM traces, 8 and 16 workers: at most 188 bytes); at most 1 + R, which holds any ladder
// whole (counts below 2^56), as the R + 1 int64 of the old layout did.
std::size_t ladder_slot_words(std::int64_t k, int workers, int rungs) {
  const std::int64_t share = (k + 25 * workers - 1) / (25 * workers);
  return static_cast<std::size_t>(
      std::min<std::int64_t>(1 + rungs, std::max<std::int64_t>(24, share)));
}

constexpr std::uint32_t kStateMagic = 0x31445845;  // "EXD1"
// Version 3 adds the controller (the exact controller's state is the histogram's), version 4 the
// exact controller's predicted cut (ExDyna::floor_rung); versions 2 and 3 are still read.
constexpr std::uint32_t kStateVersion = 4;

}  // namespace

std::int64_t ExDyna::gather_bytes(const SparsifierConfig& cfg) {
  const auto& o = cfg.exdyna;
  const std::int64_t k = cfg.k(), n = cfg.world_size;
  if (o.controller == sparsifiers::Controller::kPaper) return 8 * n + 4 * k;
  const std::int64_t cap = o.max_per_worker(k, cfg.world_size);
  const bool fusing = cap > 0 && o.fuse != sparsifiers::Fuse::kOff;
  const auto head =
      static_cast<std::int64_t>(ladder_slot_words(k, cfg.world_size, o.ladder_rungs)) +
      (fusing && o.fuse == sparsifiers::Fuse::kAuto ? 1 : 0);
  // Fused: the slot's head, one word of list length, then cap indices (fused_gather.hpp).
  return fusing ? n * (8 * (head + 1) + 4 * cap) : n * 8 * head + 4 * k;
}

ExDyna::ExDyna(const SparsifierConfig& cfg)
    : cfg_(validated(cfg)),
      k_(cfg.k()),
      parts_(sparsifiers::make_block_layout(cfg.n_g, cfg.world_size, cfg.exdyna.n_blocks),
             cfg.world_size, effective_min_blk(cfg.exdyna), cfg.exdyna.blk_move, cfg.exdyna.alpha),
      threshold_(cfg.exdyna.initial_threshold > 0 ? cfg.exdyna.initial_threshold
                                                  : sparsifiers::initial_threshold(cfg.k())),
      prev_counts_(static_cast<std::size_t>(cfg.world_size), 0) {
  if (!parts_.layout().note.empty() && cfg_.rank == 0)
    std::clog << "exdyna: " << parts_.layout().note << "\n";
  const std::size_t n = static_cast<std::size_t>(cfg_.world_size);
  std::size_t per_rank = 1;
  if (cfg_.exdyna.controller != sparsifiers::Controller::kPaper) {
    hist_.emplace(cfg_.exdyna.ladder_rungs, cfg_.exdyna.ladder_span);
    bins_.resize(static_cast<std::size_t>(hist_->rungs()));
    summed_bins_.resize(bins_.size());
    per_rank += bins_.size();
    ladder_words_ = ladder_slot_words(k_, cfg_.world_size, hist_->rungs());
  }
  worker_cap_ = cfg_.exdyna.max_per_worker(k_, cfg_.world_size);
  if (hist_) {
    // Under a cap (--fuse auto) each rank's slot also carries its timing word (read_fuse_timings).
    const bool fusing = worker_cap_ > 0 && cfg_.exdyna.fuse != sparsifiers::Fuse::kOff;
    const std::size_t head =
        ladder_words_ + (fusing && cfg_.exdyna.fuse == sparsifiers::Fuse::kAuto);
    wire_mine_.resize(head);
    wire_all_.resize(n * head);
    if (fusing) {
      fused_layout_ = {head, worker_cap_};
      fused_mine_.resize(fused_layout_.slot_words());
      fused_all_.resize(n * fused_mine_.size());
    }
  }
  if (cfg_.exdyna.controller == sparsifiers::Controller::kExact)
    resident_layout_ = fused_layout_.cap > 0  ? fused_layout_
                       : cfg_.world_size == 1 ? FusedLayout{ladder_words_, k_}
                                              : FusedLayout{};
  if (cfg_.exdyna.balance == sparsifiers::Balance::kExact)
    block_hits_.resize(static_cast<std::size_t>(parts_.layout().n_blocks));
  gather_mine_.resize(per_rank);
  gather_all_.resize(n * per_rank);
  counts_.resize(n);
  // Room for any partition (balance may give one worker most of the vector): never reallocated in
  // a step, and only the pages a partition writes become resident (core/scratch_buffer.hpp).
  idx_.reset(static_cast<std::size_t>(cfg_.n_g));
  if (hist_) abs_.reset(idx_.capacity());
  if (cfg_.exdyna.controller == sparsifiers::Controller::kExact) {
    plan_scratch_.resize(3 * n);
    group_max_.resize(static_cast<std::size_t>(cfg_.n_g) / 64 + 1);
  }
}

std::string ExDyna::fingerprint() const {
  return "exdyna;" + cfg_.fingerprint();
}

// One iteration, in the order of Alg. 1 (selection, counts, indices, values, then Alg. 5 and 3 for
// the next step), kept in one function (~110 lines, over the project's ~100) so that it reads
// line by line against the paper; the extensions beyond it live in the helpers below.
void ExDyna::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                  StepStats& stats) {
  const int n = cfg_.world_size;
  const std::int64_t t = iteration_;
  core::Stopwatch sw;
  const sparsifiers::ElementRange range =
      begin_step(comm, static_cast<std::int64_t>(acc.size()), stats);
  const float thr = static_cast<float>(threshold_);
  stats.times.other += sw.lap();

  // Alg. 4 on this worker's partition.
  const auto part =
      acc.subspan(static_cast<std::size_t>(range.begin), static_cast<std::size_t>(range.size()));
  stats.own_partition = range.size();
  const bool exact = cfg_.exdyna.controller == sparsifiers::Controller::kExact;
  const auto offset = static_cast<std::uint32_t>(range.begin);
  sparsifiers::LadderGrid grid;
  std::size_t mine;
  bool two_pass = false;  // exact controller: count first, collect after the plan
  // The exact controller is exact from iteration 0 on any stream (cold_ladder).
  const bool cold = exact && t == 0;
  double cpu = core::thread_cpu_seconds();  // the select phases' CPU time (stats.times.select_cpu)
  const auto select_cpu_lap = [&stats, &cpu] {
    const double now = core::thread_cpu_seconds();
    stats.times.select_cpu += now - cpu;
    cpu = now;
  };
  if (hist_) {
    // Same pass: the selection (or, for the exact controller, every candidate at or above the
    // ladder's lowest rung) and the ladder's bins.
    if (cold) {
      stats.times.select += sw.lap();
      select_cpu_lap();
      grid = cold_grid(core::max_abs(part), comm);
      stats.times.allgather += sw.lap();
      cpu = core::thread_cpu_seconds();
    } else {
      grid = hist_->grid(threshold_);
    }
    // The cold ladder makes every non-zero value a candidate: count them, collect after the plan.
    two_pass = exact && (cold || two_pass_next_);
    floor_ = exact && !cold ? floor_rung(grid) : 0;
    mine = ladder_pass(part, offset, grid, thr, two_pass);
    if (exact) stats.own_candidates = static_cast<std::int64_t>(mine);
    if (exact) stored_ = store_capped(part, offset, grid, two_pass, mine);
    if (exact && fuse_next_)
      pack_own_list(acc, part, offset, grid, static_cast<std::int64_t>(mine));
  } else {
    mine = sparsifiers::select_threshold(part, thr, offset, idx_.data());
  }
  stats.times.select += sw.lap();
  select_cpu_lap();

  // Alg. 1 line 11: the counts (the ladder's bins ride along).
  const std::size_t per_rank = gather_mine_.size();
  gather_counts(static_cast<std::int64_t>(mine), comm, exact && fuse_next_);
  const double counts_seconds = sw.lap();
  stats.times.allgather += counts_seconds;
  cpu = core::thread_cpu_seconds();
  read_fuse_timings();

  bool fused = false;  // the indices came with the counts
  if (exact) {
    // This iteration's cut to exactly k (when the ladders hold k), identical on every rank: each
    // worker's k_i follows from the gathered ladders, so no rank needs another collective.
    sparsifiers::plan_worker_counts(gather_all_, n, per_rank, 1, hist_->rungs(), k_, worker_cap_,
                                    counts_, plan_scratch_, summed_bins_);
    two_pass_next_ = next_two_pass(t, per_rank);
    fused = fused_sent_ && fused_lists_hold();
    if (fused)
      unpack_lists(out.indices);
    else
      mine = own_cut(part, offset, grid, two_pass);
  } else {
    for (int i = 0; i < n; ++i) counts_[i] = gather_all_[i * per_rank];
  }
  if (mine == 0 && !fused) {
    // Nothing passed: one deterministic index from this worker's own partition, so exclusivity
    // holds and every count stays positive (every rank knows: counts_ is gathered data).
    idx_[0] = static_cast<Index>(range.begin + t % range.size());
    mine = 1;
  }
  for (auto& c : counts_) c = std::max<std::int64_t>(c, 1);
  stats.times.select += sw.lap();
  select_cpu_lap();

  // Alg. 1 line 12: the indices (unless they came with the counts).
  if (!fused) {
    comm.allgather_list<Index>(std::span<const Index>(idx_.data(), mine), counts_, cfg_.gather_mode,
                               out.indices);
    const double list_seconds = sw.lap();
    stats.times.allgather += list_seconds;
    note_gather_times(counts_seconds, list_seconds);
  }
  stats.fused = fused ? 1 : 0;

  out.dense = false;
  out.values.resize(out.indices.size());
  for (std::size_t j = 0; j < out.indices.size(); ++j) out.values[j] = acc[out.indices[j]];
  allreduce_values(comm, cfg_.values, out);
  stats.times.allreduce += sw.lap();

  if (cfg_.exdyna.balance == sparsifiers::Balance::kExact) {
    std::fill(block_hits_.begin(), block_hits_.end(), 0u);
    parts_.layout().count_per_block(out.indices, block_hits_);
  }
  end_step(grid, per_rank, cold, static_cast<std::int64_t>(out.indices.size()), stats);
  if (fused) stats.padded_elements = n * worker_cap_ - stats.k_total;
  fuse_next_ = choose_fuse();
  stats.times.other += sw.lap();
}

sparsifiers::ElementRange ExDyna::begin_step(const comm::Communicator& comm, std::int64_t acc_size,
                                             StepStats& stats) {
  const int n = cfg_.world_size;
  EXDYNA_CHECK_ARG(comm.size() == n && comm.rank() == cfg_.rank, "exdyna was configured for rank ",
                   cfg_.rank, " of ", n, " but the communicator is rank ", comm.rank(), " of ",
                   comm.size());
  EXDYNA_CHECK_ARG(acc_size == cfg_.n_g, "exdyna got ", acc_size,
                   " gradients; expected n_g = ", cfg_.n_g);
  EXDYNA_CHECK_ARG(!resident_pending_, "exdyna rank ", cfg_.rank, ": iteration ", iteration_ - 1,
                   " ran resident and is not finished; call finish_resident first");
  // Alg. 3 line 29-31 (the adjustment itself ran at the end of the previous step).
  const std::int64_t t = iteration_;
  stats.threshold = threshold_;
  stats.k_target = k_;
  stats.target_density = cfg_.density;
  stats.alloc_per_worker.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    stats.alloc_per_worker[i] = sparsifiers::Partitions::allocation(t, i, n);
  stats.blocks_per_partition.assign(parts_.blocks().begin(), parts_.blocks().end());
  return parts_.range(sparsifiers::Partitions::allocation(t, cfg_.rank, n));
}

void ExDyna::end_step(const sparsifiers::LadderGrid& grid, std::size_t per_rank, bool cold,
                      std::int64_t gathered, StepStats& stats) {
  // Statistics, then Alg. 5 and Alg. 3 for the next step.
  const std::int64_t t = iteration_;
  const bool exact = cfg_.exdyna.controller == sparsifiers::Controller::kExact;
  stats.k_per_worker.assign(counts_.begin(), counts_.end());
  stats.finish_counts();
  stats.k_unique = stats.k_total;  // exclusive partitions: no duplicates by construction
  plan_next_threshold(grid, per_rank, cold, stats);
  next_cut_ = exact && worker_cap_ > 0 ? predicted_cut(grid, per_rank, t) : PredictedCut{};
  if (cfg_.exdyna.balance == sparsifiers::Balance::kExact)
    balance_exact(gathered);
  else
    parts_.adjust_paper(counts_, t);
  std::copy(counts_.begin(), counts_.end(), prev_counts_.begin());
  ++iteration_;
}

// Alg. 5 (or the histogram/exact controller): the threshold, and the ladder's reach, of the next
// step. grid: this step's ladder; cold: this step used sparsifiers::cold_ladder.
void ExDyna::plan_next_threshold(const sparsifiers::LadderGrid& grid, std::size_t per_rank,
                                 bool cold, StepStats& stats) {
  const bool exact = cfg_.exdyna.controller == sparsifiers::Controller::kExact;
  if (cold) {
    // The next ladder, at the usual resolution, around where this cut fell, reaching its widest
    // below (the gradients grow under error feedback, so the next cut lies higher, if anything).
    // It also starts the trend, as a bracketed ladder would have, with a movement of half an
    // octave held, so the reach below shrinks to the steady quarter octave over a few iterations
    // while the residual fills up; iteration 1's own movement then sets it. (A wider movement
    // held here is not needed: with the cap's reach (cold_cap_reach, cap_spread) and the widest
    // reach in iteration 1, the density table of docs/controller.md is the same row for row
    // with none held at all, and on the LSTM trace two octaves held the reach at 3-4 octaves for
    // the first six iterations.)
    threshold_ =
        sparsifiers::cut_value(grid, summed_bins_, sparsifiers::cut_ladder(summed_bins_, k_));
    stats.threshold = threshold_;
    hist_->set_trend(threshold_, 0.0, 0.5 * std::log(2.0));
    if (worker_cap_ > 0) cold_cap_reach(grid, per_rank);
    hist_->set_down(hist_->wide_down());
  } else if (hist_) {
    // The exact controller under a worker cap: when the cap binds, the other workers' ladders
    // must hold the capped workers' excess too, and at a quarter octave they ran out before k
    // (16 workers, d = 0.01 on the CNN trace: 0.83 d). Reach further below while it binds.
    if (exact && worker_cap_ > 0) {
      // (>=: where the cap would have made k unreachable, the plan lifted it.) The ladders ran
      // short only when the workers send fewer than k: the plan's own total is k minus the
      // workers it left empty, which send one index each (taking that total for "short" held the
      // reach at its widest for good wherever a worker got nothing: the CNN trace at 16 workers,
      // d = 0.001, k = 215, 4 octaves in every iteration).
      const bool short_of_k = stats.k_total < k_;
      const bool binds = std::any_of(counts_.begin(), counts_.end(),
                                     [&](std::int64_t c) { return c >= worker_cap_; });
      hist_->cap_pressure(binds, short_of_k);
      // The floor follows the spread the cuts needed (this grid's threshold sits at
      // rung down()), instead of holding the widest reach for as long as the cap binds: on the
      // CNN and LSTM traces that would hold 4 octaves while the cuts fall within half an octave,
      // and every value in that reach is a candidate the selection writes and counts.
      if (binds && !short_of_k)
        hist_->cap_spread(hist_->down() - deepest_cut_rung(grid.rungs, per_rank));
    }
    threshold_ = hist_->next_threshold(threshold_, k_, summed_bins_);
  } else {
    threshold_ = sparsifiers::paper_next_threshold(threshold_, k_, stats.k_total, cfg_.exdyna.beta,
                                                   cfg_.exdyna.gamma);
  }
}

std::size_t ExDyna::ladder_pass(std::span<const float> part, std::uint32_t offset,
                                const sparsifiers::LadderGrid& grid, float thr, bool two_pass) {
  std::fill(bins_.begin(), bins_.end(), 0);
  words_ = false;
  // The exact controller collects from this worker's floor up (floor_rung): the grid from that
  // rung on, whose bins are bins_ from that rung on, so the ladder on the wire is unchanged.
  const sparsifiers::LadderGrid sub = from_floor(grid);
  std::int64_t* const bins = bins_.data() + floor_;
  if (two_pass)  // the count only; the candidates are collected after the plan (own_cut)
    return sparsifiers::count_ladder_candidates(
        part, sub, bins, reinterpret_cast<std::uint8_t*>(abs_.data()), group_max_.data());
  if (cfg_.exdyna.controller == sparsifiers::Controller::kExact) {
    // One word per candidate where the kernel allows (own_cut expands only those it keeps).
    words_ = sparsifiers::ladder_words_fit(sparsifiers::select_kernel_in_use(), part.size(), sub);
    if (words_) return sparsifiers::collect_ladder_words(part, sub, idx_.data(), word_subs(), bins);
    return sparsifiers::collect_ladder_candidates(part, offset, sub, idx_.data(), abs_.data(),
                                                  bins);
  }
  return sparsifiers::select_threshold_ladder(part, thr, offset, idx_.data(), grid, bins_.data(),
                                              abs_.data());
}

std::size_t ExDyna::store_capped(std::span<const float> part, std::uint32_t offset,
                                 const sparsifiers::LadderGrid& grid, bool two_pass,
                                 std::size_t candidates) {
  // One pass stored every candidate from the floor; two passes none yet.
  stored_from_ = two_pass ? kNoneStored : floor_;
  const std::size_t stored = two_pass ? 0 : candidates;
  // (The candidates are the values its bins hold.)
  if (worker_cap_ <= 0 || !(two_pass || words_) ||
      static_cast<std::int64_t>(candidates) <= worker_cap_)
    return stored;
  // The bin of its cap-th largest value (bins_ are empty below the floor, so it is at or above
  // it): the most it sends unless the cap yields.
  const int from = sparsifiers::own_cut(bins_, worker_cap_).first;
  stored_from_ = from;
  const int in_sub = from - floor_;  // the same rung in the grid from the floor
  if (two_pass)
    return sparsifiers::collect_from_rung(part, offset, from_floor(grid), in_sub, group_max_.data(),
                                          idx_.data(), abs_.data());
  return sparsifiers::keep_words_from_bin(idx_.data(), word_subs(), candidates, in_sub);
}

std::size_t ExDyna::own_cut(std::span<const float> part, std::uint32_t offset,
                            const sparsifiers::LadderGrid& grid, bool two_pass) {
  const auto [cut, quota] = sparsifiers::own_cut(bins_, counts_[cfg_.rank]);
  // In the grid from this worker's floor up (its bins below the floor are empty, so the cut is
  // at or above it).
  const sparsifiers::LadderGrid sub = from_floor(grid);
  const int rung = std::max(cut - floor_, 0);
  std::size_t candidates = stored_;
  bool words = words_;
  if (cut < stored_from_) {
    // Not all the candidates the cut keeps were stored (store_capped): two passes without a
    // binding cap, or a cap that yielded (plan_worker_counts) and asks for more. Collected now
    // from this worker's own cut, the only ones take_cut keeps, as indices and values (two passes
    // skip the groups their count found below it).
    candidates = two_pass
                     ? sparsifiers::collect_from_rung(part, offset, sub, rung, group_max_.data(),
                                                      idx_.data(), abs_.data())
                     : sparsifiers::collect_at_least(part, offset, sub.value(rung), idx_.data(),
                                                     abs_.data());
    words = false;
  }
  const std::size_t mine =
      words ? sparsifiers::take_cut_words(offset, idx_.data(), word_subs(), candidates, sub, rung,
                                          quota)
            : sparsifiers::take_cut(idx_.data(), abs_.data(), candidates, sub, rung, quota);
  EXDYNA_CHECK(static_cast<std::int64_t>(mine) == counts_[cfg_.rank], "exdyna rank ", cfg_.rank,
               " kept ", mine, " values but the gathered ladders give it ", counts_[cfg_.rank]);
  return mine;
}

sparsifiers::LadderGrid ExDyna::from_floor(const sparsifiers::LadderGrid& grid) const {
  sparsifiers::LadderGrid sub = grid;
  sub.lo_key += static_cast<std::uint32_t>(floor_);
  sub.rungs -= floor_;
  return sub;
}

int ExDyna::floor_rung(const sparsifiers::LadderGrid& grid) const {
  // Under a worker cap the reach below the threshold follows the deepest worker's cut (the
  // cap's floor, HistogramController::cap_spread), but a capped worker cuts where its own
  // partition holds the cap, often octaves above that: on the LSTM trace at d = 0.01, 7 of 8
  // workers sent the cap in every iteration, and a hot partition stored up to 110,000 candidates
  // for 1,083 kept. So each worker collects only from a margin below the cut that its partition
  // needed in the last step (predicted_cut: the worker that read it then), the margin being the
  // reach that the threshold's movement alone asks for plus a quarter octave, or the rung above
  // which the partition held kCoverFactor times that worker's count where that rung is higher
  // (but at least a quarter octave under the cut): a partition of many similar values (an LSTM
  // weight matrix held 30 % of its 182,000 values within 1.5 octaves of its cut) needs the margin
  // in values, not octaves. Never above the rung that the movement's reach would give the ladder,
  // so without a binding cap nothing changes. Rank-local: the others see this worker's bins as they
  // are (empty below its floor), and every rank plans from the same gathered ladders.
  if (!(next_cut_.cut > 0)) return 0;
  const int movement = hist_->movement_down();
  const int room = hist_->down() - movement;  // rungs held for the cap's spread only
  if (room <= 0) return 0;
  const auto key_of = [&](double v) {
    return static_cast<std::int64_t>(
               sparsifiers::ladder_key(static_cast<float>(v), grid.mant_bits)) -
           static_cast<std::int64_t>(grid.lo_key);
  };
  const std::int64_t cut = key_of(next_cut_.cut);
  std::int64_t rung = cut - movement - hist_->steady_down();
  if (next_cut_.cover > 0)
    rung = std::max(rung, std::min(key_of(next_cut_.cover), cut - hist_->steady_down()));
  return static_cast<int>(std::clamp<std::int64_t>(rung, 0, std::min(room, grid.rungs - 2)));
}

ExDyna::PredictedCut ExDyna::predicted_cut(const sparsifiers::LadderGrid& grid,
                                           std::size_t per_rank, std::int64_t t) const {
  // The value of prev's own cut rung in this step's ladder predicts this worker's next one.
  const auto holder = next_partition_holder(t);
  if (!holder) return {};
  const int prev = *holder;
  const auto cut = gathered_cut(prev, grid.rungs, per_rank);
  if (!cut) return {};  // nothing to go by
  PredictedCut p;
  p.cut = grid.value(*cut);
  // The highest rung at which prev's ladder holds kCoverFactor times its count (none: 0).
  if (const auto cover = gathered_cut(prev, grid.rungs, per_rank, kCoverFactor))
    p.cover = grid.value(*cover);
  return p;
}

std::optional<int> ExDyna::next_partition_holder(std::int64_t t) const {
  // Alg. 3's rotation: next step this worker reads the partition that worker rank + 1 read in
  // this one (exact balance moves its edges a little).
  const int n = cfg_.world_size;
  const int prev = (cfg_.rank + 1) % n;
  if (sparsifiers::Partitions::allocation(t, prev, n) !=
      sparsifiers::Partitions::allocation(t + 1, cfg_.rank, n))
    return std::nullopt;
  return prev;
}

bool ExDyna::next_two_pass(std::int64_t t, std::size_t per_rank) const {
  // The candidates of the worker that read the next partition in this step, gathered with the
  // counts, over its length, predict the share of candidates the next pass meets.
  const auto prev = next_partition_holder(t);
  if (!prev) return false;
  const int next = sparsifiers::Partitions::allocation(t + 1, cfg_.rank, cfg_.world_size);
  const auto candidates = gather_all_[static_cast<std::size_t>(*prev) * per_rank];
  return static_cast<double>(candidates) >=
         kTwoPassShare * static_cast<double>(parts_.range(next).size());
}

void ExDyna::balance_exact(std::int64_t gathered) {
  // Every rank holds the same gathered indices, so every rank computes the same boundaries.
  // Shares, not counts: while the threshold is still moving, one iteration's k' may be many
  // times the next one's, and raw counts would let it dominate the smoothed load.
  const double share = 1.0 / static_cast<double>(gathered);
  const double keep = block_load_.empty() ? 0.0 : 1.0 - kBalanceWeight;
  const double add = block_load_.empty() ? share : kBalanceWeight * share;
  block_load_.resize(block_hits_.size(), 0.0);
  for (std::size_t b = 0; b < block_load_.size(); ++b)
    block_load_[b] = keep * block_load_[b] + add * static_cast<double>(block_hits_[b]);
  parts_.balance_exact(block_load_);
}

void ExDyna::gather_counts(std::int64_t mine, comm::Communicator& comm, bool fused) {
  fused_sent_ = fused;
  if (!hist_) {
    gather_mine_[0] = mine;
    comm.allgather_counts(gather_mine_, gather_all_);
    return;
  }
  // Count and bins in one fixed slot per rank (sparsifiers/exdyna/ladder_wire.hpp), decoded into
  // gather_all_'s layout (count, then R bins, per rank). A ladder too long for its slot loses its
  // lowest rungs, and this rank then reads its own ladder as the others do, so every rank plans
  // alike. The slot's head may carry the timing word, and the fused slot this worker's list.
  const std::size_t head = wire_mine_.size();
  const auto send = std::span<std::int64_t>(fused ? fused_mine_ : wire_mine_);
  const auto recv = std::span<const std::int64_t>(fused ? fused_all_ : wire_all_);
  slot_lowest_rung_ = sparsifiers::encode_ladder(mine, bins_, send.first(ladder_words_));
  if (sends_timings()) send[ladder_words_] = my_timing_;
  my_timing_ = 0;
  if (fused)
    comm.allgather_fused(send, head + 1, fused_all_);
  else
    comm.allgather_counts(send, wire_all_);
  decode_gathered(recv, send.size());
}

void ExDyna::decode_gathered(std::span<const std::int64_t> recv, std::size_t stride) {
  const std::size_t per_rank = gather_mine_.size();
  const auto all = std::span<std::int64_t>(gather_all_);
  for (std::size_t i = 0; i < static_cast<std::size_t>(cfg_.world_size); ++i)
    sparsifiers::decode_ladder(recv.subspan(i * stride, ladder_words_), all[i * per_rank],
                               all.subspan(i * per_rank + 1, bins_.size()));
  const auto own = all.subspan(static_cast<std::size_t>(cfg_.rank) * per_rank + 1, bins_.size());
  std::copy(own.begin(), own.end(), bins_.begin());
  std::fill(summed_bins_.begin(), summed_bins_.end(), 0);
  for (std::size_t i = 0; i < static_cast<std::size_t>(cfg_.world_size); ++i)
    for (std::size_t j = 0; j < summed_bins_.size(); ++j)
      summed_bins_[j] += all[i * per_rank + 1 + j];
}

sparsifiers::LadderGrid ExDyna::cold_grid(float own_max_abs, comm::Communicator& comm) {
  // Every rank's max as its bit pattern: the all-gather is of integers, and every rank takes the
  // same maximum, so every rank builds the same ladder.
  const std::int64_t mine = std::bit_cast<std::uint32_t>(own_max_abs);
  std::vector<std::int64_t> all(static_cast<std::size_t>(cfg_.world_size));
  comm.allgather_counts(std::span<const std::int64_t>(&mine, 1), all);
  const auto top = static_cast<std::uint32_t>(*std::max_element(all.begin(), all.end()));
  return sparsifiers::cold_ladder(std::bit_cast<float>(top), hist_->rungs());
}

void ExDyna::cold_cap_reach(const sparsifiers::LadderGrid& grid, std::size_t per_rank) {
  // Under a binding cap the workers below it cut deeper than the global threshold: as deep as
  // the deepest worker cut in this (exact) iteration. The next ladders must reach that far below
  // the threshold from the start, or they run short until cap_pressure has widened them.
  const int deepest = deepest_cut_rung(grid.rungs, per_rank);
  const double octaves = std::log2(std::max(1.0, threshold_ / grid.value(deepest)));
  const double fine = std::ceil(octaves * static_cast<double>(1 << hist_->mant_bits()));
  const int reach = hist_->steady_down() + static_cast<int>(std::min<double>(fine, 1 << 20));
  hist_->set_min_down(std::clamp(reach, hist_->steady_down(), hist_->wide_down()));
}

std::optional<int> ExDyna::gathered_cut(int w, int rungs, std::size_t per_rank,
                                        std::int64_t times) const {
  const auto bins =
      std::span<const std::int64_t>(gather_all_)
          .subspan(static_cast<std::size_t>(w) * per_rank + 1, static_cast<std::size_t>(rungs));
  const auto count = times * counts_[static_cast<std::size_t>(w)];
  std::int64_t held = 0;
  for (const auto b : bins) held += b;
  if (held < count) return std::nullopt;  // it sent one index from an empty ladder
  return sparsifiers::own_cut(bins, count).first;
}

int ExDyna::deepest_cut_rung(int rungs, std::size_t per_rank) const {
  int deepest = rungs - 1;
  for (int w = 0; w < cfg_.world_size; ++w)
    if (const auto cut = gathered_cut(w, rungs, per_rank)) deepest = std::min(deepest, *cut);
  return deepest;
}

std::vector<std::byte> ExDyna::save_state() const {
  EXDYNA_CHECK_ARG(!resident_pending_, "exdyna rank ", cfg_.rank,
                   ": the state is saved only after finish_resident (a resident step is pending)");
  core::ByteWriter w;
  w.put(kStateMagic);
  w.put(kStateVersion);
  w.put<std::int32_t>(static_cast<std::int32_t>(cfg_.exdyna.controller));
  w.put<std::int64_t>(cfg_.n_g);
  w.put<std::int64_t>(parts_.layout().n_blocks);
  w.put(iteration_);
  w.put(threshold_);
  w.put_list(parts_.blocks());
  w.put_list(std::span<const std::int64_t>(prev_counts_));
  // The controller's and balance's state: the ladder's reach and the smoothed block load (empty
  // when unused).
  w.put<std::int32_t>(hist_ ? hist_->down() : -1);
  w.put<double>(hist_ ? hist_->last_exact() : -1.0);
  w.put<double>(hist_ ? hist_->log_trend() : 0.0);
  w.put<double>(hist_ ? hist_->movement() : 0.0);
  w.put<std::int32_t>(hist_ ? hist_->min_down() : -1);
  w.put_list(std::span<const double>(block_load_));
  w.put<double>(next_cut_.cut);
  w.put<double>(next_cut_.cover);
  return w.take();
}

void ExDyna::load_state(std::span<const std::byte> state) {
  EXDYNA_CHECK_ARG(!resident_pending_, "exdyna rank ", cfg_.rank,
                   ": a state is loaded only after finish_resident (a resident step is pending)");
  core::ByteReader r(state, "exdyna state");
  EXDYNA_CHECK_T(DataError, r.get<std::uint32_t>() == kStateMagic,
                 "exdyna state does not start with the exdyna magic; not an exdyna checkpoint");
  const auto version = r.get<std::uint32_t>();
  EXDYNA_CHECK_T(DataError, version >= 2 && version <= kStateVersion, "exdyna state version ",
                 version, " is not supported; expected 2..", kStateVersion);
  if (version >= 3) {
    const auto c = r.get<std::int32_t>();
    const auto mine = static_cast<std::int32_t>(cfg_.exdyna.controller);
    EXDYNA_CHECK_T(DataError, c == mine, "exdyna state was saved with controller ",
                   c >= 0 && c <= 2 ? to_string(static_cast<Controller>(c)) : "?",
                   "; this sparsifier uses ", sparsifiers::to_string(cfg_.exdyna.controller));
  }
  const auto n_g = r.get<std::int64_t>();
  EXDYNA_CHECK_T(DataError, n_g == cfg_.n_g, "exdyna state is for n_g = ", n_g, "; expected ",
                 cfg_.n_g);
  const auto nb = r.get<std::int64_t>();
  EXDYNA_CHECK_T(DataError, nb == parts_.layout().n_blocks, "exdyna state is for n_b = ", nb,
                 "; expected ", parts_.layout().n_blocks);
  const auto iteration = r.get<std::int64_t>();
  const auto threshold = r.get<double>();
  const auto blocks = get_list_of<std::int64_t>(r, cfg_.world_size);
  auto prev = get_list_of<std::int64_t>(r, cfg_.world_size);
  const auto down = r.get<std::int32_t>();
  const auto last_exact = r.get<double>();
  const auto log_trend = r.get<double>();
  const auto movement = version >= 3 ? r.get<double>() : 0.0;
  const auto min_down = version >= 3 ? r.get<std::int32_t>() : -1;
  EXDYNA_CHECK_T(DataError, (down >= 0) == hist_.has_value(),
                 "exdyna state was saved with controller ",
                 down >= 0 ? "histogram or exact" : "paper", "; this sparsifier uses ",
                 sparsifiers::to_string(cfg_.exdyna.controller));
  auto load = r.get_list<double>();
  PredictedCut next_cut;
  if (version >= 4) {
    next_cut.cut = r.get<double>();
    next_cut.cover = r.get<double>();
  }
  const auto load_size = static_cast<std::int64_t>(load.size());
  EXDYNA_CHECK_T(DataError, load_size == 0 || load_size == parts_.layout().n_blocks,
                 "exdyna state holds ", load_size,
                 " block loads; expected 0 or n_b = ", parts_.layout().n_blocks);
  r.expect_end();
  EXDYNA_CHECK_T(DataError,
                 iteration >= 0 && iteration <= kMaxStateIteration && threshold == threshold &&
                     next_cut.cut >= 0 && std::isfinite(next_cut.cut) && next_cut.cover >= 0 &&
                     std::isfinite(next_cut.cover),
                 "exdyna state holds iteration ", iteration, ", threshold ", threshold,
                 " and predicted cut ", next_cut.cut, " / ", next_cut.cover,
                 "; expected iteration 0..", kMaxStateIteration,
                 ", a number and finite values >= 0");
  parts_.set_blocks(blocks);
  iteration_ = iteration;
  threshold_ = threshold;
  prev_counts_ = std::move(prev);
  if (hist_) {
    hist_->set_down(down);
    hist_->set_trend(last_exact, log_trend, movement);
    hist_->set_min_down(min_down >= 0 ? min_down : hist_->steady_down());
  }
  block_load_ = std::move(load);
  next_cut_ = next_cut;
  // The fused all-gather's costs are measured afresh (every rank loads its state, so every rank
  // chooses alike).
  my_timing_ = 0;
  timed_bytes_ = fuse_latency_ = fuse_per_byte_ = 0;
  fuse_next_ = iteration_ > 0 && choose_fuse();
}

}  // namespace exdyna::sparsifiers
