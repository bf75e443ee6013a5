// exdyna's one error policy: exceptions. Every message names the offending value and what was
// expected, so a user can fix the input without reading the source.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace exdyna {

// Base of everything exdyna throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A user-supplied option or argument is out of range or malformed. Error is a virtual base here
// and in DataError so that core::ByteStreamError can be both with one Error inside.
class InvalidArgument : public virtual Error {
 public:
  using Error::Error;
};

// Input data (a gradient, a trace, a dataset file) is malformed: NaN/Inf, truncated, corrupt.
class DataError : public virtual Error {
 public:
  using Error::Error;
};

// A collective failed: a peer died, the group was aborted, or the engine reported an error.
class CommError : public Error {
 public:
  using Error::Error;
};

// A blocking collective did not complete within its timeout.
class TimeoutError : public CommError {
 public:
  using CommError::CommError;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace exdyna

// EXDYNA_CHECK(cond, parts...) throws exdyna::Error with the streamed parts when cond is false.
#define EXDYNA_CHECK_T(ExType, cond, ...)                             \
  do {                                                                \
    if (!(cond)) throw ExType(::exdyna::detail::concat(__VA_ARGS__)); \
  } while (0)
#define EXDYNA_CHECK(cond, ...) EXDYNA_CHECK_T(::exdyna::Error, cond, __VA_ARGS__)
// Argument validation: throws InvalidArgument.
#define EXDYNA_CHECK_ARG(cond, ...) EXDYNA_CHECK_T(::exdyna::InvalidArgument, cond, __VA_ARGS__)
// Compares two values and prints both when they differ.
#define EXDYNA_CHECK_EQ(a, b, ...)                                                            \
  do {                                                                                        \
    const auto& exdyna_a_ = (a);                                                              \
    const auto& exdyna_b_ = (b);                                                              \
    if (!(exdyna_a_ == exdyna_b_))                                                            \
      throw ::exdyna::Error(::exdyna::detail::concat(__VA_ARGS__, " (", #a, " = ", exdyna_a_, \
                                                     ", ", #b, " = ", exdyna_b_, ")"));       \
  } while (0)
