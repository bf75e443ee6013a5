// device_kernels.hpp's encode_slot: this worker's count and ladder, in device memory after its
// count pass, written into its slot of the count (or fused) all-gather by one GPU thread
// (device_wire.hpp's encode_ladder_slot, which tests/unit/sparsifiers/exdyna/device_wire_test.cpp
// holds to encode_ladder), so the slot travels without a trip through the host.
#include <cuda_runtime.h>

#include "exdyna/core/device_workspace.cuh"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"

namespace exdyna::sparsifiers::device {

using namespace core::device;  // NOLINT(google-build-using-namespace)

namespace {

__global__ void encode_kernel(const std::int64_t* count, const std::int64_t* bins, int rungs,
                              std::int64_t* slot, std::size_t words, std::int64_t* result) {
  int lowest = 0;
  result[0] = rules::encode_ladder_slot(*count, bins, rungs, slot, words, &lowest);
  result[1] = lowest;
}

}  // namespace

void encode_slot(Workspace& ws, const std::int64_t* d_count, const std::int64_t* d_bins, int rungs,
                 std::int64_t* d_slot, std::size_t words, std::int64_t* d_result) {
  EXDYNA_CHECK_ARG(rungs >= 1 && rungs <= 257 && words >= 1, "device ladder slot of ", words,
                   " words for ", rungs, " rungs; expected 1..257 rungs and at least one word");
  auto& w = ws.impl();
  TimedCall timed(w);
  EXDYNA_CUDA_LAUNCH("encode_kernel", encode_kernel<<<1, 1, 0, w.stream>>>(
                                          d_count, d_bins, rungs, d_slot, words, d_result));
  w.kernels_done();
}

}  // namespace exdyna::sparsifiers::device
