// Small helpers to (de)serialise a sparsifier's scalar state for checkpoints.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "exdyna/core/error.hpp"

namespace exdyna::sparsifiers::state_io {

template <typename T>
void put(std::vector<std::byte>& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

// Reads a T at `pos` and advances it; throws InvalidArgument naming the sparsifier if the state
// is too short.
template <typename T>
T get(std::span<const std::byte> in, std::size_t& pos, std::string_view who) {
  static_assert(std::is_trivially_copyable_v<T>);
  EXDYNA_CHECK_ARG(pos + sizeof(T) <= in.size(), who, ": saved state has ", in.size(),
                   " bytes, expected at least ", pos + sizeof(T));
  T v;
  std::memcpy(&v, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return v;
}

inline void expect_end(std::span<const std::byte> in, std::size_t pos, std::string_view who) {
  EXDYNA_CHECK_ARG(pos == in.size(), who, ": saved state has ", in.size(), " bytes, expected ",
                   pos);
}

}  // namespace exdyna::sparsifiers::state_io
