// Exact top-k selection by magnitude, the kernel of the sorting-based sparsifiers (Top-k, CLT-k).
//
// Order: larger |v[i]| first; among equal magnitudes, the smaller index first. This total order
// makes the selected set unique, so every engine, run and method (nth_element or heap) picks the
// same indices. Both methods return the indices in ascending order.
//
// Each element becomes one 64-bit key, (bits of |v[i]|) << 32 | (2^32 - 1 - i): for non-NaN
// floats the bits of |v| order like |v| as unsigned integers, so comparing keys as integers is the
// order above, with no branches on floats. Inputs must be NaN-free (error feedback refuses NaN
// before any selection); indices must fit 32 bits (n < 2^32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace exdyna::core {

enum class TopkMethod {
  kNthElement,  // introselect over all n keys: O(n) expected, 8 bytes written per element
  kHeap,        // min-heap of k keys: O(n log k) worst case, O(k) memory
};
const char* to_string(TopkMethod m);
TopkMethod parse_topk_method(std::string_view s);  // "nth_element" | "heap"

// Buffers reused across calls, so repeated selections allocate only on the first call.
struct TopkScratch {
  std::vector<std::uint64_t> keys;
};

// Writes to out the indices of the min(k, v.size()) largest |v[i]| in the order above, sorted
// ascending. out is resized; its capacity is kept.
void topk_select(std::span<const float> v, std::size_t k, TopkMethod method,
                 std::vector<std::uint32_t>& out, TopkScratch& scratch);
void topk_nth_element(std::span<const float> v, std::size_t k, std::vector<std::uint32_t>& out,
                      TopkScratch& scratch);
void topk_heap(std::span<const float> v, std::size_t k, std::vector<std::uint32_t>& out,
               TopkScratch& scratch);

}  // namespace exdyna::core
