// A fixed-capacity array whose contents are scratch: it is never zero-filled or copied, so a large
// buffer costs a page fault only for each page the first time it is written, and never again.
//
// Why not std::vector: ExDyna's per-partition buffers must hold the largest partition a worker may
// be given, and partitions move every step (the allocation rotates, balance moves blocks). A vector
// grown on demand reallocates, zero-fills and copies tens of MB in the middle of a step, and every
// fresh page faults again: at n_g = 25.6M on 8 workers that was 0.6 s of one worker's step while
// the others took 15 ms (docs/benchmarks.md). Reserving n_g elements up front without touching
// them costs address space only; resident memory follows the largest partition actually seen (in
// 2 MiB steps: a buffer of 4 MiB or more is advised onto huge pages, see huge_pages.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

#include "exdyna/core/huge_pages.hpp"

namespace exdyna::core {

template <typename T>
class ScratchBuffer {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "ScratchBuffer holds plain values only (they are left uninitialised)");

 public:
  ScratchBuffer() = default;
  explicit ScratchBuffer(std::size_t capacity) { reset(capacity); }

  // Replaces the storage by `capacity` uninitialised elements (the old contents are dropped).
  void reset(std::size_t capacity) {
    // new T[n] default-initialises: for a trivial T nothing is written, so no page is touched.
    data_.reset(capacity > 0 ? new T[capacity] : nullptr);
    capacity_ = capacity;
    advise_huge_pages(data_.get(), capacity * sizeof(T));
  }

  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  std::size_t capacity() const noexcept { return capacity_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t capacity_ = 0;
};

}  // namespace exdyna::core
