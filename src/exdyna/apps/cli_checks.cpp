#include "exdyna/apps/cli_checks.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace exdyna::apps {

namespace {

// Whole-string parses; the option's own conversion reports text that is not a number.
bool parse_int(const std::string& s, long long& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  v = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end && *end == '\0';
}

bool parse_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

}  // namespace

CLI::Validator int_between(long long lo, long long hi) {
  const std::string expect =
      hi == std::numeric_limits<long long>::max()
          ? "an integer >= " + std::to_string(lo)
          : "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, expect](std::string& s) -> std::string {
        long long v = 0;
        if (!parse_int(s, v)) return s + " is not valid; expected " + expect;
        if (v < lo || v > hi) return s + " is not valid; expected " + expect;
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
        double v = 0;
        if (!parse_double(s, v) || !std::isfinite(v) || !(v > 0) || v > hi)
          return s + " is not valid; expected " + expect;
        return {};
      },
      expect.substr(expect.find(' ') + 1));
}

CLI::Validator positive_number() {
  return positive_at_most(HUGE_VAL);
}

}  // namespace exdyna::apps
