// A step that stays on the device: ExDyna's exact controller under a worker cap with the fused
// all-gather, or on one worker (ExDyna::step_resident), its every pass enqueued on the device with
// no result brought to the host inside the step. The host decides only what it knew before the step
// (this worker's partition, the ladder's grid and floor, the shapes of every buffer) from the state
// the previous step left; the passes that follow the gathered slots (the plan, the list, the
// values) run on the device, and the slots, the per-block counts and the list's length come back
// one step late (post_readback, wait_readback) for the host's own state.
//
// One difference from ExDyna::step's fused step, stated: where the plan gives a worker more
// than the list it sent (the cap yielded, which step answers with the index all-gather), the
// resident step takes that worker's whole list, so the step sends fewer than k; both paths apply
// the same rule to their state (ExDyna::finish_resident), so every rank stays alike.
//
// Implementations: the CUDA one over the kernels of sparsifiers/exdyna/device_kernels.hpp, and
// the host one of the unit tests (tests/unit/sparsifiers/host_resident_step.hpp), which holds
// step_resident to step()'s decisions on any machine.
#pragma once

#include <cstdint>
#include <span>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sparsifiers/exdyna/fused_gather.hpp"
#include "exdyna/sparsifiers/exdyna/partition.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

// The fixed shapes of a resident step (known to every rank before it).
struct ResidentShape {
  int workers = 0;
  int rank = 0;
  int rungs = 0;                 // the ladder's bins
  std::size_t ladder_words = 0;  // the ladder's words at the start of each slot (ladder_wire.hpp)
  FusedLayout layout;            // the slot (head: the ladder words, then a timing word or not)
  std::int64_t plan_cap = 0;     // the plan's worker cap (0 on one worker, whose slot holds k)
  std::int64_t k = 0;            // the list's length: the values all-reduce carries k
  std::int64_t n_g = 0;          // the list's padding index (no gradient has it)
};

class ResidentStep {
 public:
  virtual ~ResidentStep() = default;

  // This worker's slot from its partition acc[begin, begin + len): the ladder's count pass in
  // `grid` (the step's grid from this worker's floor: floor_grid), its bins placed from rung
  // `floor` of the full ladder (`shape.rungs` bins, empty below), the cut of L = min(count, cap)
  // largest candidates (own_cut of L on the full bins, take_cut at rung max(cut - floor, 0) of
  // floor_grid), each one's place in the cut's order, and the slot: the ladder encoded, a zero
  // timing word where the head has one, then L, the indices and the places (pack_fused).
  virtual void pack_slot(const float* acc, std::int64_t begin, std::int64_t len,
                         const LadderGrid& floor_grid, int floor, const ResidentShape& shape) = 0;
  // Every rank's slot (an all-gather of equal slots).
  virtual void allgather_slots(comm::Communicator& comm, const ResidentShape& shape) = 0;
  // The plan over the gathered ladders (plan_worker_counts under shape.plan_cap), then the list:
  // each rank's entries placed below min(count, L) in rank order (a rank with count 0: its index
  // one[rank]), padded to k with shape.n_g.
  virtual void plan_list(std::span<const Index> one, const ResidentShape& shape) = 0;
  // The values: acc at the list (0 at the padding), summed over the ranks; k of them.
  virtual void allreduce_values(const float* acc, comm::Communicator& comm,
                                const ResidentShape& shape) = 0;
  // BlockLayout::count_per_block of the list's indices (not the padding), for exact balance.
  virtual void count_per_block(const BlockLayout& layout) = 0;
  // The list and its sums on the device (k entries; the padding's index is n_g), until the next
  // step's plan_list.
  virtual const Index* list() const = 0;
  virtual const float* sums() const = 0;

  // Enqueues the copy of this step's gathered slots, per-block counts (if counted), the list's
  // length and the plan's status to the host; wait_readback returns them once they are there (it
  // waits for the device if they are not).
  struct Readback {
    std::span<const std::int64_t> slots;  // every rank's slot, shape.layout.slot_words() apart
    std::span<const std::uint32_t> hits;  // per block (empty where not counted)
    std::int64_t listed = 0;              // the list's indices before the padding
    std::int64_t status = 0;              // rules::PlanStatus of the plan and the list
  };
  virtual void post_readback() = 0;
  virtual Readback wait_readback() = 0;
};

}  // namespace exdyna::sparsifiers
