// Range checks for numeric command-line options, as CLI11 validators: a bad value is refused while
// parsing, and CLI11 prefixes the message with the option as the user typed it
// ("--n-grad: 0 is not valid; expected an integer >= 1"), so no error later in the run has to
// guess which flag a configuration field came from. main() exits 2 on every parse error.
//
// The number parsing of every command lives here too, so a value reads the same whether a validator
// checks it or a command converts it later (comma lists, sizes with a unit).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "exdyna/core/error.hpp"

namespace exdyna::apps {

// The whole of s as a number, in strtod's forms (leading white space, a sign, an exponent, inf):
// nullopt when it is not one or is too large for a double; a value too small for one is its
// rounded value.
std::optional<double> parse_number(const std::string& s);
// The whole of s as a base-10 integer: nullopt when it is not one or is out of range.
std::optional<long long> parse_integer(const std::string& s);
// A number followed by a unit ("64K", "1.5GiB"): the number, as parse_number reads it, and the
// rest of s (empty when there is no unit); nullopt when s does not start with a number.
struct NumberWithUnit {
  double value = 0;
  std::string unit;
};
std::optional<NumberWithUnit> parse_number_with_unit(const std::string& s);

// An integer >= lo (and <= hi).
CLI::Validator int_at_least(long long lo);
CLI::Validator int_between(long long lo, long long hi);
// A finite number > 0, and <= hi when given (e.g. a density in (0, 1]).
CLI::Validator positive_number();
CLI::Validator positive_at_most(double hi);

// Values a command converts after CLI11 (the items of a comma list, a size with a unit): the
// InvalidArgument names the option and the value ("--workers '0' is not valid; expected ...").
// An integer in lo .. hi.
int parse_int_in(const std::string& s, const char* option, int lo, int hi);
// A density in (0, 1].
double parse_density(const std::string& s, const char* option);
// A byte count such as 4096, 64K, 16M or 1G (binary units), 4 B .. 4 GiB.
std::uint64_t parse_byte_size(const std::string& s, const char* option);

// parse(), its InvalidArgument prefixed with the option as typed: for values parsed after CLI11
// (enum names, ITER:FACTOR) whose parsers live in the library and do not know the flag.
template <typename F>
auto parsed(const char* option, F&& parse) {
  try {
    return parse();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat(option, ": ", e.what()));
  }
}

}  // namespace exdyna::apps
