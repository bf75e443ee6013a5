// The one raw byte format of exdyna's saved state (sparsifier state, training checkpoints):
// trivially copyable values in the host's byte order, lists as a 64-bit count then the elements.
// State is read back by the same build, so no byte swapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "exdyna/core/error.hpp"

namespace exdyna::core {

// A byte stream is shorter or longer than its contents say. It is malformed data (DataError) and,
// to a load_state() that was handed it, a bad argument (InvalidArgument): callers catch either.
class ByteStreamError : public DataError, public InvalidArgument {
 public:
  explicit ByteStreamError(const std::string& what)
      : Error(what), DataError(what), InvalidArgument(what) {}
};

class ByteWriter {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  // A 64-bit count, then the elements.
  template <typename T>
  void put_list(std::span<const T> v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<std::uint64_t>(v.size());
    const auto* p = reinterpret_cast<const std::byte*>(v.data());
    buf_.insert(buf_.end(), p, p + v.size() * sizeof(T));
  }
  void put_string(std::string_view s) { put_list(std::span<const char>(s.data(), s.size())); }

  const std::vector<std::byte>& bytes() const { return buf_; }
  std::vector<std::byte> take() { return std::move(buf_); }

 private:
  std::vector<std::byte> buf_;
};

// Reads what ByteWriter wrote. Every refusal is a ByteStreamError that starts with `who` (the
// thing being read, e.g. "topk state" or "checkpoint <path>") and gives the offset and size.
class ByteReader {
 public:
  ByteReader(std::span<const std::byte> in, std::string who) : in_(in), who_(std::move(who)) {}

  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> get_list() {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto n = get<std::uint64_t>();
    // Divide rather than multiply: a corrupt count must not overflow the check.
    if (n > remaining() / sizeof(T))
      throw ByteStreamError(detail::concat(who_, " is truncated: a list of ", n, " elements of ",
                                           sizeof(T), " bytes at offset ", pos_, " of ",
                                           in_.size()));
    std::vector<T> v(static_cast<std::size_t>(n));
    if (n > 0) std::memcpy(v.data(), in_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  std::string get_string() {
    const auto chars = get_list<char>();
    return std::string(chars.begin(), chars.end());
  }

  std::size_t pos() const { return pos_; }
  std::size_t remaining() const { return in_.size() - pos_; }
  bool done() const { return pos_ == in_.size(); }
  // Throws unless every byte has been read.
  void expect_end() const {
    if (!done())
      throw ByteStreamError(detail::concat(who_, " has ", in_.size(), " bytes, expected ", pos_));
  }

 private:
  void need(std::size_t n) const {
    if (n > remaining())
      throw ByteStreamError(detail::concat(who_, " is truncated: needs ", n,
                                           " more bytes at offset ", pos_, " of ", in_.size()));
  }

  std::span<const std::byte> in_;
  std::string who_;
  std::size_t pos_ = 0;
};

}  // namespace exdyna::core
