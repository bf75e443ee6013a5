// A monotonic stopwatch for phase timings, and the calling thread's CPU clock.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

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

// CPU seconds of the calling thread: a step's own work, which W ranks sharing fewer cores do not
// inflate (waiting in a collective costs none), unlike its wall time.
inline double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// What one lap of thread_cpu_seconds() reads with nothing in it: the median over `laps` empty
// laps. Reading this clock is a system call (0.5 us per lap on the development VM), and a phase
// timed with it carries about one lap's worth of the clock's own cost: a few-microsecond phase
// reads noticeably longer than the work inside it.
inline double thread_cpu_lap_cost(int laps = 2001) {
  std::vector<double> d(static_cast<std::size_t>(std::max(laps, 1)));
  for (auto& x : d) {
    const double a = thread_cpu_seconds();
    x = thread_cpu_seconds() - a;
  }
  const auto mid = d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2);
  std::nth_element(d.begin(), mid, d.end());
  return *mid;
}

// Consecutive phases of one thread, in wall and in CPU time: lap() returns the wall seconds since
// construction or the last lap, as Stopwatch does, and last_cpu() the thread's CPU seconds over
// the same interval (what W ranks sharing fewer cores than W do not inflate).
class PhaseStopwatch {
 public:
  PhaseStopwatch() : cpu0_(thread_cpu_seconds()) {}
  double lap() {
    const double now = thread_cpu_seconds();
    last_cpu_ = now - cpu0_;
    cpu0_ = now;
    return wall_.lap();
  }
  double last_cpu() const { return last_cpu_; }

 private:
  Stopwatch wall_;
  double cpu0_, last_cpu_ = 0;
};

}  // namespace exdyna::core
