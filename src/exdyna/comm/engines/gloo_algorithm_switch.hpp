// Where the Gloo engine changes from its log-round algorithms to the ring (gloo_algorithms.hpp):
// read from EXDYNA_GLOO_LOG_BELOW, or measured on the job's own links when the communicator starts.
//
// Internal to the Gloo engine (needs Gloo's headers).
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

// "auto" (or empty): nullopt, measure at start-up. "ring": always the ring (0, 0). "SIZE": the same
// switch for all-reduce and all-gather; "SIZE,SIZE": all-reduce's, then all-gather's. SIZE is a
// byte count with an optional K or M suffix (1024-based). Throws InvalidArgument naming the value.
std::optional<Communicator::AlgorithmSwitch> parse_algorithm_switch(const std::string& s);

// The switch from a short sweep on ctx (every rank calls it, at the same point): per operation,
// result sizes of 1K, 4K, ..., 1M bytes, each algorithm timed three times (best kept), until the
// ring is at least as fast as the log-round algorithm; the switch is the first size where it is
// (twice the largest size where the log rounds win everywhere), so the latency-bound sizes take
// log2 W rounds and the rest the ring. The sweep stops early once a call takes 50 ms, where both
// carry the same bytes and latency no longer decides. Rank 0's measurement is broadcast, so
// every rank takes the same switch. Tags from tag_base up.
Communicator::AlgorithmSwitch measure_algorithm_switch(const std::shared_ptr<::gloo::Context>& ctx,
                                                       std::chrono::milliseconds timeout,
                                                       std::uint32_t tag_base);

}  // namespace exdyna::comm
