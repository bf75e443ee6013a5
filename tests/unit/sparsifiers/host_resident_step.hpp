// A ResidentStep over host memory: the passes of a step that stays on the device, made of the
// CPU's selection kernels and of the very functions the CUDA kernels run
// (sparsifiers/exdyna/device_plan.hpp and device_wire.hpp: decode, plan, list), so the unit tests
// hold ExDyna::step_resident to step()'s decisions on any machine. The readback is a copy made at
// post_readback, as the device's copy to pinned memory would be.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "exdyna/sparsifiers/exdyna/device_plan.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"
#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_wire.hpp"
#include "exdyna/sparsifiers/resident_step.hpp"

namespace exdyna::test {

class HostResidentStep final : public sparsifiers::ResidentStep {
 public:
  using Index = sparsifiers::Index;

  void pack_slot(const float* acc, std::int64_t begin, std::int64_t len,
                 const sparsifiers::LadderGrid& floor_grid, int floor,
                 const sparsifiers::ResidentShape& shape) override {
    const auto part = std::span<const float>(acc + begin, static_cast<std::size_t>(len));
    const auto offset = static_cast<std::uint32_t>(begin);
    bins_.assign(static_cast<std::size_t>(shape.rungs), 0);
    idx_.resize(part.size() + 1);
    abs_.resize(part.size() + 1);
    const std::size_t count = sparsifiers::collect_ladder_candidates(
        part, offset, floor_grid, idx_.data(), abs_.data(), bins_.data() + floor);
    const std::int64_t list =
        std::min<std::int64_t>(static_cast<std::int64_t>(count), shape.layout.cap);
    std::size_t kept = 0;
    if (list > 0) {
      int cut = 0;
      std::int64_t quota = 0;
      EXPECT_EQ(sparsifiers::rules::own_cut_form(bins_.data(), shape.rungs, list, &cut, &quota),
                sparsifiers::rules::kPlanOk);
      kept = sparsifiers::take_cut(idx_.data(), abs_.data(), count, floor_grid,
                                   std::max(cut - floor, 0), quota);
    }
    EXPECT_EQ(static_cast<std::int64_t>(kept), list);
    keys_.resize(kept);
    for (std::size_t i = 0; i < kept; ++i)
      keys_[i] = sparsifiers::cut_order_key(std::fabs(acc[idx_[i]]), floor_grid);
    slot_.assign(shape.layout.slot_words(), 0);
    int lowest = 0;
    EXPECT_EQ(sparsifiers::rules::encode_ladder_slot(static_cast<std::int64_t>(count), bins_.data(),
                                                     shape.rungs, slot_.data(), shape.ladder_words,
                                                     &lowest),
              sparsifiers::rules::kPlanOk);
    sparsifiers::pack_fused(std::span<const std::uint32_t>(idx_.data(), kept), keys_, shape.layout,
                            slot_, scratch_);
  }

  void allgather_slots(comm::Communicator& comm, const sparsifiers::ResidentShape& shape) override {
    all_.resize(slot_.size() * static_cast<std::size_t>(shape.workers));
    comm.allgather_fused(slot_, shape.layout.head_words + 1, all_);
  }

  void plan_list(std::span<const Index> one, const sparsifiers::ResidentShape& shape) override {
    namespace rules = sparsifiers::rules;
    const auto n = static_cast<std::size_t>(shape.workers);
    const std::size_t stride = shape.layout.slot_words(),
                      per = 1 + static_cast<std::size_t>(shape.rungs);
    std::vector<std::int64_t> decoded(n * per), counts(n), scratch(4 * n);
    status_ = rules::kPlanOk;
    for (std::size_t j = 0; j < n && status_ == rules::kPlanOk; ++j)
      status_ = rules::decode_ladder_slot(all_.data() + j * stride, shape.ladder_words, shape.rungs,
                                          &decoded[j * per], &decoded[j * per + 1]);
    int st = rules::kPlanOk;
    if (status_ == rules::kPlanOk)
      rules::plan_counts_form(
          rules::PlanLadders{decoded.data(), shape.workers, per, 1, shape.rungs}, shape.k,
          shape.plan_cap, counts.data(), scratch.data(), &st);
    if (status_ == rules::kPlanOk) status_ = st;
    list_.clear();
    for (std::size_t j = 0; j < n; ++j) {
      const rules::FusedSlot slot{all_.data() + j * stride, shape.layout.head_words,
                                  shape.layout.cap};
      const std::int64_t held = slot.count();
      if (counts[j] > held) {
        ++yields_;
        if (status_ == rules::kPlanOk) status_ = rules::kFusedCapYielded;
      }
      const std::int64_t c = std::min(counts[j], held);
      if (c <= 0) {
        list_.push_back(one[j]);
        continue;
      }
      std::vector<std::uint32_t> mine(static_cast<std::size_t>(c));
      int s = rules::kPlanOk;
      EXPECT_EQ(rules::unpack_slot_form(slot, c, mine.data(), &s), c);
      list_.insert(list_.end(), mine.begin(), mine.end());
    }
    listed_ = static_cast<std::int64_t>(list_.size());
    EXPECT_LE(listed_, shape.k);
    list_.resize(static_cast<std::size_t>(std::max(shape.k, listed_)),
                 static_cast<Index>(shape.n_g));
  }

  void allreduce_values(const float* acc, comm::Communicator& comm,
                        const sparsifiers::ResidentShape& shape) override {
    sums_.assign(static_cast<std::size_t>(shape.k), 0.0f);
    for (std::size_t j = 0; j < sums_.size(); ++j)
      if (list_[j] < static_cast<Index>(shape.n_g)) sums_[j] = acc[list_[j]];
    comm.allreduce_sum(std::span<float>(sums_));
  }

  void count_per_block(const sparsifiers::BlockLayout& layout) override {
    hits_.assign(static_cast<std::size_t>(layout.n_blocks), 0u);
    layout.count_per_block(std::span<const Index>(list_.data(), static_cast<std::size_t>(listed_)),
                           hits_);
  }
  const Index* list() const override { return list_.data(); }
  const float* sums() const override { return sums_.data(); }

  void post_readback() override {
    rb_slots_ = all_;
    rb_hits_ = hits_;
    hits_.clear();
    rb_listed_ = listed_;
    rb_status_ = status_;
    ++posted_;
  }
  Readback wait_readback() override {
    ++waited_;
    return {rb_slots_, rb_hits_, rb_listed_, rb_status_};
  }

  std::int64_t listed() const { return listed_; }
  int yields() const { return yields_; }  // plans that gave a worker more than its list
  int posted() const { return posted_; }
  int waited() const { return waited_; }

 private:
  std::vector<std::int64_t> bins_, slot_, all_, rb_slots_;
  std::vector<Index> idx_, list_;
  std::vector<float> abs_, sums_;
  std::vector<std::uint32_t> keys_, hits_, rb_hits_;
  std::vector<std::uint64_t> scratch_;
  std::int64_t listed_ = 0, rb_listed_ = 0, rb_status_ = 0;
  int status_ = 0, yields_ = 0, posted_ = 0, waited_ = 0;
};

}  // namespace exdyna::test
