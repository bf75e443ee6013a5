#include "exdyna/core/topk_select.hpp"

#include <algorithm>
#include <bit>
#include <functional>

#include "exdyna/core/enum_names.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/huge_pages.hpp"

namespace exdyna::core {

namespace {

inline std::uint64_t make_key(float x, std::size_t i) {
  const std::uint32_t mag = std::bit_cast<std::uint32_t>(x) & 0x7fffffffu;
  return (static_cast<std::uint64_t>(mag) << 32) | (0xffffffffu - static_cast<std::uint32_t>(i));
}

inline std::uint32_t key_index(std::uint64_t key) {
  return 0xffffffffu - static_cast<std::uint32_t>(key & 0xffffffffu);
}

void check_size(std::span<const float> v) {
  EXDYNA_CHECK_ARG(v.size() < (std::uint64_t{1} << 32), "top-k over ", v.size(),
                   " elements is not supported; indices are 32-bit, expected fewer than 2^32");
}

// Copies the k best keys' indices to out, ascending.
void keys_to_sorted_indices(std::span<const std::uint64_t> best, std::vector<std::uint32_t>& out) {
  out.resize(best.size());
  for (std::size_t j = 0; j < best.size(); ++j) out[j] = key_index(best[j]);
  std::sort(out.begin(), out.end());
}

// Restores the min-heap property below the root after the root was replaced.
void sift_down_root(std::uint64_t* h, std::size_t n) {
  std::size_t i = 0;
  const std::uint64_t x = h[0];
  for (;;) {
    std::size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && h[c + 1] < h[c]) ++c;
    if (h[c] >= x) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = x;
}

}  // namespace

constexpr EnumNames<TopkMethod, 2> kTopkMethodNames{
    {{TopkMethod::kNthElement, "nth_element"}, {TopkMethod::kHeap, "heap"}}};

const char* to_string(TopkMethod m) {
  return enum_to_string(kTopkMethodNames, m);
}

TopkMethod parse_topk_method(std::string_view s) {
  return enum_parse(kTopkMethodNames, "top-k method", s);
}

void topk_nth_element(std::span<const float> v, std::size_t k, std::vector<std::uint32_t>& out,
                      TopkScratch& scratch) {
  check_size(v);
  const std::size_t n = v.size();
  k = std::min(k, n);
  auto& keys = scratch.keys;
  resize_huge(keys, n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = make_key(v[i], i);
  if (k < n)
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(k), keys.end(),
                     std::greater<>());
  keys_to_sorted_indices(std::span<const std::uint64_t>(keys.data(), k), out);
}

void topk_heap(std::span<const float> v, std::size_t k, std::vector<std::uint32_t>& out,
               TopkScratch& scratch) {
  check_size(v);
  const std::size_t n = v.size();
  k = std::min(k, n);
  auto& heap = scratch.keys;
  heap.resize(k);
  if (k == 0) {
    out.clear();
    return;
  }
  for (std::size_t i = 0; i < k; ++i) heap[i] = make_key(v[i], i);
  std::make_heap(heap.begin(), heap.end(),
                 std::greater<>());  // min-heap: heap[0] is the worst kept
  std::uint64_t* h = heap.data();
  for (std::size_t i = k; i < n; ++i) {
    const std::uint64_t key = make_key(v[i], i);
    if (key > h[0]) {
      h[0] = key;
      sift_down_root(h, k);
    }
  }
  keys_to_sorted_indices(heap, out);
}

void topk_select(std::span<const float> v, std::size_t k, TopkMethod method,
                 std::vector<std::uint32_t>& out, TopkScratch& scratch) {
  if (method == TopkMethod::kHeap)
    topk_heap(v, k, out, scratch);
  else
    topk_nth_element(v, k, out, scratch);
}

}  // namespace exdyna::core
