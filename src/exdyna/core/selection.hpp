// Partition-wise threshold selection (paper Alg. 4): the indices of every |x| >= threshold in one
// contiguous partition. This pass reads the partition once and is meant to run at memory speed:
// at d <= 0.01 almost no group of 16 values holds a selected one, so the kernel compares 16
// floats at a time (SSE2, baseline x86-64) and skips the group when none passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace exdyna::core {

// Writes offset + i for every i with |part[i]| >= threshold, in increasing order, into out
// (the caller guarantees room for part.size() entries) and returns how many. NaN never passes.
// Entries of out past the count (below part.size()) may be overwritten.
std::size_t select_threshold(std::span<const float> part, float threshold, std::uint32_t offset,
                             std::uint32_t* out);

// The same, one element at a time: the reference the tests compare the fast kernel with.
std::size_t select_threshold_scalar(std::span<const float> part, float threshold,
                                    std::uint32_t offset, std::uint32_t* out);

// The implementations behind select_threshold, picked once at run time from what the CPU offers
// (the build itself targets baseline x86-64). Exposed so tests can check every one this CPU runs.
// The vector kernels store whole vectors of indices: entries past the returned count, up to
// part.size(), are overwritten with scratch.
enum class SelectKernel { kScalar, kSse2, kAvx2, kAvx512 };
const char* to_string(SelectKernel k);
bool select_kernel_available(SelectKernel k);
SelectKernel select_kernel_in_use();
std::size_t select_threshold_with(SelectKernel k, std::span<const float> part, float threshold,
                                  std::uint32_t offset, std::uint32_t* out);

}  // namespace exdyna::core
