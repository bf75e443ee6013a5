// What this process holds right now: resident memory and open file descriptors, read from
// /proc/self (Linux). The soak checks of `exdyna simulate --resources` sample them to show that a
// long run neither grows nor leaks.
#pragma once

#include <cstdint>

namespace exdyna::sim {

// Resident set size in bytes (/proc/self/statm's second field times the page size); -1 where
// /proc is not available.
std::int64_t resident_bytes();

// Open file descriptors of this process (entries of /proc/self/fd, not counting the one used to
// list them); -1 where /proc is not available.
std::int64_t open_descriptors();

}  // namespace exdyna::sim
