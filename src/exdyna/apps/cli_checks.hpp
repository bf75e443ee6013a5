// Range checks for numeric command-line options, as CLI11 validators: a bad value is refused while
// parsing, and CLI11 prefixes the message with the option as the user typed it
// ("--n-grad: 0 is not valid; expected an integer >= 1"), so no error later in the run has to
// guess which flag a configuration field came from. main() exits 2 on every parse error.
#pragma once

#include <CLI/CLI.hpp>

#include "exdyna/core/error.hpp"

namespace exdyna::apps {

// An integer >= lo (and <= hi).
CLI::Validator int_at_least(long long lo);
CLI::Validator int_between(long long lo, long long hi);
// A finite number > 0, and <= hi when given (e.g. a density in (0, 1]).
CLI::Validator positive_number();
CLI::Validator positive_at_most(double hi);

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
