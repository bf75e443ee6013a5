// core/timer.hpp: the thread CPU clock, and what one empty lap of it reads (the clock's own cost,
// which `exdyna bench select` takes off its medians).
#include <gtest/gtest.h>

#include <cmath>

#include "exdyna/core/timer.hpp"

using exdyna::core::thread_cpu_lap_cost;
using exdyna::core::thread_cpu_seconds;

namespace {

// About `seconds` of this thread's CPU time, spent computing.
double burn(double seconds) {
  const double start = thread_cpu_seconds();
  double x = 1.0;
  while (thread_cpu_seconds() - start < seconds)
    for (int i = 0; i < 1000; ++i) x = std::sqrt(x + 1.0);
  return x;
}

}  // namespace

TEST(Timer, AnEmptyLapOfTheThreadClockCostsSomethingButFarLessThanWork) {
  const double lap = thread_cpu_lap_cost(201);
  EXPECT_GT(lap, 0.0);    // reading the clock is not free, so a lap never reads 0 in the median
  EXPECT_LT(lap, 50e-6);  // and it is a system call, not a millisecond
  const double a = thread_cpu_seconds();
  EXPECT_GT(burn(2e-3), 1.0);
  EXPECT_GT(thread_cpu_seconds() - a, 10 * lap);
}

TEST(Timer, TheLapCostIsAMedianOverAtLeastOneLap) {
  EXPECT_GT(thread_cpu_lap_cost(1), 0.0);
  EXPECT_GT(thread_cpu_lap_cost(0), 0.0);  // asked for none, it still reads one
}
