// One name table per enum: to_string and parse read the same {value, name} pairs, so a new value
// is added in one place and the refusal lists exactly the names that parse accepts.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "exdyna/core/error.hpp"

namespace exdyna::core {

template <typename E>
struct EnumName {
  E value;
  const char* name;  // a string literal
};

template <typename E, std::size_t N>
using EnumNames = std::array<EnumName<E>, N>;

// The first name of v in the table (later entries for the same value are accepted aliases), or
// "?" for a value the table does not hold.
template <typename E, std::size_t N>
constexpr const char* enum_to_string(const EnumNames<E, N>& table, E v) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return "?";
}

// Whether table[i] repeats an earlier entry's value: an alias that parse accepts but messages
// and to_string do not show.
template <typename E, std::size_t N>
constexpr bool enum_is_alias(const EnumNames<E, N>& table, std::size_t i) {
  for (std::size_t j = 0; j < i; ++j)
    if (table[j].value == table[i].value) return true;
  return false;
}

// "'a', 'b' or 'c'": the canonical names, for messages.
template <typename E, std::size_t N>
std::string enum_name_list(const EnumNames<E, N>& table) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < N; ++i) total += enum_is_alias(table, i) ? 0 : 1;
  std::string out;
  std::size_t listed = 0;
  for (std::size_t i = 0; i < N; ++i) {
    if (enum_is_alias(table, i)) continue;
    if (listed > 0) out += listed + 1 == total ? " or " : ", ";
    ++listed;
    out += '\'';
    out += table[i].name;
    out += '\'';
  }
  return out;
}

// The value named s; throws InvalidArgument "<what> '<s>' is not valid; expected <names>".
template <typename E, std::size_t N>
E enum_parse(const EnumNames<E, N>& table, std::string_view what, std::string_view s) {
  for (const auto& e : table)
    if (s == e.name) return e.value;
  throw InvalidArgument(
      detail::concat(what, " '", s, "' is not valid; expected ", enum_name_list(table)));
}

}  // namespace exdyna::core
