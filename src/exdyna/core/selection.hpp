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
std::size_t select_threshold(std::span<const float> part, float threshold, std::uint32_t offset,
                             std::uint32_t* out);

// The same, one element at a time: the reference the tests compare the fast kernel with.
std::size_t select_threshold_scalar(std::span<const float> part, float threshold,
                                    std::uint32_t offset, std::uint32_t* out);

}  // namespace exdyna::core
