// device_kernels.hpp's plan_counts: the exact controller's plan of ladder_cut.cpp on the device, so
// that a step need not bring the gathered ladders to the host before it cuts. One block: each
// thread decodes some ranks' slots (device_plan.hpp's decode_ladder_slot) into the count
// all-gather's layout, then thread 0 plans (plan_counts_form: a few thousand additions for 129
// rungs and 16 workers) and cuts this worker's own count (own_cut_form). The forms are the ones
// tests/unit/sparsifiers/exdyna/device_plan_test.cpp holds to the CPU plan.
#include <cuda_runtime.h>

#include "exdyna/core/device_workspace.cuh"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_plan.hpp"

namespace exdyna::sparsifiers::device {

using namespace core::device;  // NOLINT(google-build-using-namespace)

namespace {

constexpr int kPlanThreads = 128;

__global__ void plan_kernel(const std::int64_t* slots, PlanShape shape,
                            const std::int64_t* own_bins, std::int64_t* decoded,
                            std::int64_t* scratch, std::int64_t* out) {
  __shared__ int first_bad;  // the lowest rank whose slot failed to decode (workers: none)
  if (threadIdx.x == 0) first_bad = shape.workers;
  __syncthreads();
  const std::size_t stride = 1 + static_cast<std::size_t>(shape.rungs);
  for (int w = static_cast<int>(threadIdx.x); w < shape.workers; w += blockDim.x) {
    std::int64_t* at = decoded + static_cast<std::size_t>(w) * stride;
    const int s = rules::decode_ladder_slot(slots + static_cast<std::size_t>(w) * shape.slot_stride,
                                            shape.ladder_words, shape.rungs, at, at + 1);
    if (s != rules::kPlanOk) atomicMin(&first_bad, w);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int n = shape.workers;
  std::int64_t* status = out + n + 3;
  out[n + 4] = -1;
  if (first_bad < n) {
    std::int64_t* at = decoded + static_cast<std::size_t>(first_bad) * stride;
    *status =
        rules::decode_ladder_slot(slots + static_cast<std::size_t>(first_bad) * shape.slot_stride,
                                  shape.ladder_words, shape.rungs, at, at + 1);
    out[n + 4] = first_bad;
    return;
  }
  const rules::PlanLadders ladders{decoded, n, stride, 1, shape.rungs};
  int s = rules::kPlanOk;
  out[n] = rules::plan_counts_form(ladders, shape.k, shape.cap, out, scratch, &s);
  if (s == rules::kPlanOk) {
    int rung = 0;
    std::int64_t quota = 0;
    // Without its own full ladder, this worker cuts its decoded one, as gather_counts has it.
    const std::int64_t* bins = own_bins != nullptr
                                   ? own_bins
                                   : decoded + static_cast<std::size_t>(shape.rank) * stride + 1;
    s = rules::own_cut_form(bins, shape.rungs, out[shape.rank], &rung, &quota);
    out[n + 1] = rung;
    out[n + 2] = quota;
  }
  *status = s;
}

}  // namespace

void plan_counts(Workspace& ws, const std::int64_t* d_slots, const PlanShape& shape,
                 const std::int64_t* d_own_bins, std::int64_t* d_out) {
  EXDYNA_CHECK_ARG(shape.workers >= 1 && shape.rungs >= 1 && shape.rungs <= 257 && shape.k >= 1,
                   "device ladder plan for ", shape.workers, " workers, ", shape.rungs,
                   " rungs, k = ", shape.k, "; expected workers >= 1, 1..257 rungs and k >= 1");
  EXDYNA_CHECK_ARG(shape.ladder_words >= 1 && shape.ladder_words <= shape.slot_stride,
                   "device ladder plan: a ladder of ", shape.ladder_words, " words in slots of ",
                   shape.slot_stride, "; expected 1 <= ladder words <= slot words");
  EXDYNA_CHECK_ARG(shape.rank >= 0 && shape.rank < shape.workers, "device ladder plan for rank ",
                   shape.rank, "; expected 0..", shape.workers - 1);
  auto& w = ws.impl();
  TimedCall timed(w);
  const std::size_t n = static_cast<std::size_t>(shape.workers);
  const std::size_t decoded_words = n * (1 + static_cast<std::size_t>(shape.rungs));
  auto* d_decoded = w.plan.as<std::int64_t>(decoded_words + 4 * n);
  const unsigned threads =
      shape.workers >= kPlanThreads ? kPlanThreads : ((shape.workers + 31) / 32) * 32;
  EXDYNA_CUDA_LAUNCH("plan_kernel",
                     plan_kernel<<<1, threads, 0, w.stream>>>(d_slots, shape, d_own_bins, d_decoded,
                                                              d_decoded + decoded_words, d_out));
  w.kernels_done();
}

}  // namespace exdyna::sparsifiers::device
