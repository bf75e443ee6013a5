#include "exdyna/apps/cli_checks.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace exdyna::apps {

std::optional<NumberWithUnit> parse_number_with_unit(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  // Overflow is refused like text that is no number; underflow keeps strtod's rounded value.
  if (end == s.c_str() || (errno == ERANGE && std::isinf(v))) return std::nullopt;
  return NumberWithUnit{v, std::string(end)};
}

std::optional<double> parse_number(const std::string& s) {
  auto n = parse_number_with_unit(s);
  if (!n || !n->unit.empty()) return std::nullopt;
  return n->value;
}

std::optional<long long> parse_integer(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') return std::nullopt;
  return v;
}

CLI::Validator int_between(long long lo, long long hi) {
  const std::string expect =
      hi == std::numeric_limits<long long>::max()
          ? "an integer >= " + std::to_string(lo)
          : "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, expect](std::string& s) -> std::string {
        const auto v = parse_integer(s);
        if (!v || *v < lo || *v > hi) return s + " is not valid; expected " + expect;
        return {};
      },
      expect.substr(expect.find(' ') + 1));
}

CLI::Validator int_at_least(long long lo) {
  return int_between(lo, std::numeric_limits<long long>::max());
}

CLI::Validator positive_at_most(double hi) {
  char hi_text[32];
  std::snprintf(hi_text, sizeof hi_text, "%g", hi);
  const std::string expect = std::isinf(hi) ? std::string("a finite number > 0")
                                            : std::string("a number in (0, ") + hi_text + "]";
  return CLI::Validator(
      [hi, expect](std::string& s) -> std::string {
        const auto v = parse_number(s);
        if (!v || !std::isfinite(*v) || !(*v > 0) || *v > hi)
          return s + " is not valid; expected " + expect;
        return {};
      },
      expect.substr(expect.find(' ') + 1));
}

CLI::Validator positive_number() {
  return positive_at_most(HUGE_VAL);
}

int parse_int_in(const std::string& s, const char* option, int lo, int hi) {
  const auto v = parse_integer(s);
  EXDYNA_CHECK_ARG(v && *v >= lo && *v <= hi, option, " '", s,
                   "' is not valid; expected an integer in ", lo, " .. ", hi);
  return static_cast<int>(*v);
}

double parse_density(const std::string& s, const char* option) {
  const auto v = parse_number(s);
  EXDYNA_CHECK_ARG(v && *v > 0 && *v <= 1, option, " '", s,
                   "' is not valid; expected a density in (0, 1]");
  return *v;
}

std::uint64_t parse_byte_size(const std::string& s, const char* option) {
  const auto n = parse_number_with_unit(s);
  EXDYNA_CHECK_ARG(n, option, " '", s,
                   "' is not valid; expected a size such as 4096, 64K, 16M or 1G");
  const std::string& unit = n->unit;
  double mul = 1;
  if (unit == "K" || unit == "k" || unit == "KiB")
    mul = 1024;
  else if (unit == "M" || unit == "MiB")
    mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mul = 1024.0 * 1024 * 1024;
  else
    EXDYNA_CHECK_ARG(unit.empty() || unit == "B", option, " '", s,
                     "' has an unknown unit; expected B, K, M or G");
  const double v = n->value;
  EXDYNA_CHECK_ARG(v > 0 && v * mul <= 4.0 * 1024 * 1024 * 1024, option, " '", s,
                   "' is not valid; expected 4 B .. 4 GiB");
  return static_cast<std::uint64_t>(v * mul);
}

}  // namespace exdyna::apps
