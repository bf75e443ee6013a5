// Single kernels of the GPU path (device_error_feedback.hpp), for the GPU benchmarks (bench/gpu,
// through the Python package's cuda_select_threshold and cuda_accumulate). Not installed: they
// time one pass of a step, not something a user of the library calls.
#pragma once

#include <cstdint>

namespace exdyna::sparsifiers {

// The selection pass of one partition (indices of |acc| >= threshold into out, in order; returns
// how many) and the accumulate (residual += grad; returns the first non-finite index or -1), on
// `stream` (a cudaStream_t as void*). A build without CUDA refuses them, as it refuses
// make_device_error_feedback.
std::int64_t device_select_threshold(const float* acc, std::int64_t n, float threshold,
                                     std::uint32_t* out, void* stream);
std::int64_t device_accumulate(float* residual, const float* grad, std::int64_t n, void* stream);

}  // namespace exdyna::sparsifiers
