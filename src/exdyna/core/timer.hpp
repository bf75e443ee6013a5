// A monotonic stopwatch for phase timings.
#pragma once

#include <chrono>

namespace exdyna::core {

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  // Seconds since construction or the last lap(), and restarts.
  double lap() {
    const auto now = Clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

}  // namespace exdyna::core
