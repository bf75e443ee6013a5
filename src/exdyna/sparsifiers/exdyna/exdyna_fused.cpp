// ExDyna's fused all-gather (fused_gather.hpp): under the exact controller's worker cap, the
// counts, the ladders and every worker's list of its largest candidates travel in one all-gather,
// and the values' all-reduce follows: two collectives per step instead of three. The decisions are
// the three-collective path's, index for index; --fuse auto picks the path that the engine's
// measured latency and bandwidth say costs less.
#include <algorithm>
#include <cmath>
#include <limits>

#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

void ExDyna::pack_own_list(std::span<const float> acc, std::span<const float> part,
                           std::uint32_t offset, const sparsifiers::LadderGrid& grid,
                           std::int64_t candidates) {
  const sparsifiers::LadderGrid sub = from_floor(grid);
  if (stored_from_ == kNoneStored) {
    // Two passes under a cap that does not bind: no more than the cap are candidates; collected
    // now, as own_cut would collect them after the plan.
    stored_ = sparsifiers::collect_from_rung(part, offset, sub, 0, group_max_.data(), idx_.data(),
                                             abs_.data());
    stored_from_ = floor_;
    words_ = false;
  }
  const std::int64_t list = std::min(candidates, worker_cap_);
  std::size_t kept = 0;
  if (list > 0) {
    fused_idx_.assign(idx_.data(), idx_.data() + stored_);
    // The cut of `list` values, as own_cut makes it for a planned count (on copies: take_cut
    // works in place, and a fallback to the index all-gather cuts the stored candidates again).
    const auto [cut, quota] = sparsifiers::own_cut(bins_, list);
    const int rung = std::max(cut - floor_, 0);
    if (words_) {
      fused_subs_.assign(word_subs(), word_subs() + stored_);
      kept = sparsifiers::take_cut_words(offset, fused_idx_.data(), fused_subs_.data(), stored_,
                                         sub, rung, quota);
    } else {
      fused_abs_.assign(abs_.data(), abs_.data() + stored_);
      kept = sparsifiers::take_cut(fused_idx_.data(), fused_abs_.data(), stored_, sub, rung, quota);
    }
  }
  EXDYNA_CHECK(static_cast<std::int64_t>(kept) == list, "exdyna rank ", cfg_.rank, " cut ", kept,
               " of its candidates for the fused all-gather; expected ", list);
  fused_idx_.resize(kept);
  fused_keys_.resize(kept);
  for (std::size_t i = 0; i < kept; ++i)
    fused_keys_[i] = sparsifiers::cut_order_key(std::fabs(acc[fused_idx_[i]]), sub);
  sparsifiers::pack_fused(fused_idx_, fused_keys_, fused_layout_, fused_mine_, fused_scratch_);
}

bool ExDyna::fused_lists_hold() const {
  const std::size_t stride = fused_mine_.size();
  const auto all = std::span<const std::int64_t>(fused_all_);
  for (std::size_t j = 0; j < counts_.size(); ++j)
    if (counts_[j] > sparsifiers::fused_count(all.subspan(j * stride, stride), fused_layout_))
      return false;  // the cap yielded for worker j: the index all-gather carries this step
  return true;
}

void ExDyna::unpack_lists(std::vector<Index>& indices) const {
  const int n = cfg_.world_size;
  const std::int64_t t = iteration_;
  const std::size_t stride = fused_mine_.size();
  const auto all = std::span<const std::int64_t>(fused_all_);
  indices.clear();
  for (int j = 0; j < n; ++j) {
    const std::int64_t c = counts_[static_cast<std::size_t>(j)];
    if (c > 0) {
      sparsifiers::unpack_fused(all.subspan(static_cast<std::size_t>(j) * stride, stride),
                                fused_layout_, c, indices);
    } else {
      // The empty worker's one deterministic index (step()'s rule), from its partition.
      const auto range = parts_.range(sparsifiers::Partitions::allocation(t, j, n));
      indices.push_back(static_cast<Index>(range.begin + t % range.size()));
    }
  }
}

void ExDyna::note_gather_times(double counts_seconds, double list_seconds) {
  if (!sends_timings() || fused_sent_) return;  // no timing word, or no small gather
  const auto us = [](double s) {
    return std::clamp<std::int64_t>(std::llround(s * 1e6), 1,
                                    std::numeric_limits<std::int32_t>::max());
  };
  my_timing_ = us(counts_seconds) << 32 | us(list_seconds);
  timed_bytes_ = index_gather_bytes();
}

void ExDyna::read_fuse_timings() {
  if (!sends_timings() || !(timed_bytes_ > 0)) return;
  const auto& all = fused_sent_ ? fused_all_ : wire_all_;
  const std::size_t stride = all.size() / static_cast<std::size_t>(cfg_.world_size);
  // The least over the ranks: the last rank to arrive at a collective waits for no one, so its
  // time is the collective's own.
  std::int64_t counts_us = std::numeric_limits<std::int64_t>::max(), list_us = counts_us;
  for (std::size_t r = 0; r < static_cast<std::size_t>(cfg_.world_size); ++r) {
    const std::int64_t w = all[r * stride + ladder_words_];
    if (w <= 0) return;  // the last step sent none (it fused, or is the first)
    counts_us = std::min(counts_us, w >> 32);
    list_us = std::min(list_us, w & 0xffffffff);
  }
  fuse_latency_ = 1e-6 * static_cast<double>(counts_us);
  fuse_per_byte_ =
      1e-6 * static_cast<double>(std::max<std::int64_t>(list_us - counts_us, 0)) / timed_bytes_;
}

bool ExDyna::choose_fuse() const {
  if (fused_layout_.cap <= 0) return false;  // no cap, or --fuse off
  if (cfg_.exdyna.fuse == sparsifiers::Fuse::kOn) return true;
  // --fuse auto: measure first, and again now and then.
  if (!(fuse_latency_ > 0) || iteration_ % kFuseProbeEvery == 0) return false;
  const double list_bytes = static_cast<double>(cfg_.world_size) * 8.0 *
                            static_cast<double>(fused_layout_.slot_words() - wire_mine_.size());
  return sparsifiers::fused_pays(fuse_latency_, fuse_per_byte_, list_bytes - index_gather_bytes());
}

double ExDyna::index_gather_bytes() const {
  std::int64_t sum = 0, most = 0;
  for (const auto c : counts_) {
    sum += c;
    most = std::max(most, c);
  }
  const auto elements = cfg_.gather_mode == comm::GatherMode::kPadded
                            ? most * static_cast<std::int64_t>(counts_.size())
                            : sum;
  return static_cast<double>(elements) * static_cast<double>(sizeof(Index));
}

}  // namespace exdyna::sparsifiers
