#include "exdyna/comm/engines/gloo_algorithm_switch.hpp"

#include <gloo/broadcast.h>
#include <gloo/math.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <vector>

#include "exdyna/comm/engines/gloo_algorithms.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::comm {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t parse_size(const std::string& s, const std::string& whole) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  std::int64_t unit = 1;
  const std::string rest = end ? std::string(end) : std::string();
  if (rest == "K" || rest == "k") unit = 1024;
  if (rest == "M" || rest == "m") unit = 1024 * 1024;
  EXDYNA_CHECK_ARG(!s.empty() && errno == 0 && end != s.c_str() && v >= 0 &&
                       (rest.empty() || unit > 1) && v <= (1LL << 40) / unit,
                   "EXDYNA_GLOO_LOG_BELOW='", whole,
                   "' is not valid; expected auto, ring, SIZE or SIZE,SIZE (bytes, optional K or "
                   "M suffix; all-reduce's switch, then all-gather's)");
  return v * unit;
}

// Seconds of the best of three calls of body(tag), tags counted from tag.
template <typename Body>
double best_of_three(std::uint32_t& tag, Body&& body) {
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    body(tag++);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// Broadcasts rank 0's word, so every rank takes rank 0's decision.
std::int64_t rank0s(const std::shared_ptr<::gloo::Context>& ctx, std::chrono::milliseconds timeout,
                    std::uint32_t tag, std::int64_t word) {
  ::gloo::BroadcastOptions o(ctx);
  o.setTag(tag);
  o.setTimeout(timeout);
  o.setRoot(0);
  o.setOutput(&word, 1);
  ::gloo::broadcast(o);
  return word;
}

// The first size where the ring is at least as fast, by rank 0's clock, decided size by size on
// rank 0 so every rank makes the same calls; run(bytes, algorithm, tag) makes one call.
template <typename Run>
std::int64_t sweep(const std::shared_ptr<::gloo::Context>& ctx, std::chrono::milliseconds timeout,
                   std::uint32_t& tag, Run&& run) {
  constexpr std::array<std::int64_t, 6> kSizes{1 << 10, 1 << 12, 1 << 14,
                                               1 << 16, 1 << 18, 1 << 20};
  run(kSizes[0], GlooAlgorithm::kRing, tag++);  // warm-up: connections, allocations
  run(kSizes[0], GlooAlgorithm::kLog, tag++);
  for (const auto bytes : kSizes) {
    const double log =
        best_of_three(tag, [&](std::uint32_t t) { run(bytes, GlooAlgorithm::kLog, t); });
    const double ring =
        best_of_three(tag, [&](std::uint32_t t) { run(bytes, GlooAlgorithm::kRing, t); });
    if (rank0s(ctx, timeout, tag++, ring <= log || ring > 0.05)) return bytes;
  }
  return 2 * kSizes.back();
}

}  // namespace

std::optional<Communicator::AlgorithmSwitch> parse_algorithm_switch(const std::string& s) {
  if (s.empty() || s == "auto") return std::nullopt;
  if (s == "ring") return Communicator::AlgorithmSwitch{0, 0};
  const auto comma = s.find(',');
  if (comma == std::string::npos) {
    const auto b = parse_size(s, s);
    return Communicator::AlgorithmSwitch{b, b};
  }
  return Communicator::AlgorithmSwitch{parse_size(s.substr(0, comma), s),
                                       parse_size(s.substr(comma + 1), s)};
}

Communicator::AlgorithmSwitch measure_algorithm_switch(const std::shared_ptr<::gloo::Context>& ctx,
                                                       std::chrono::milliseconds timeout,
                                                       std::uint32_t tag_base) {
  std::uint32_t tag = tag_base;
  std::vector<float> values;
  std::vector<std::uint8_t> mine, out;
  std::vector<std::size_t> sizes;
  const auto n = static_cast<std::size_t>(ctx->size);
  const ::gloo::AllreduceOptions::Func kSum =
      static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&::gloo::sum<float>);
  std::array<std::int64_t, 2> below{};
  below[0] = sweep(ctx, timeout, tag, [&](std::int64_t bytes, GlooAlgorithm a, std::uint32_t t) {
    values.assign(static_cast<std::size_t>(bytes) / sizeof(float), 1.0f);
    gloo_allreduce(ctx, t, timeout, values.data(), values.size(), kSum, a);
  });
  below[1] = sweep(ctx, timeout, tag, [&](std::int64_t bytes, GlooAlgorithm a, std::uint32_t t) {
    const std::size_t each = std::max<std::size_t>(8, static_cast<std::size_t>(bytes) / n);
    mine.assign(each, 1);
    out.resize(each * n);
    sizes.assign(n, each);
    gloo_allgatherv(ctx, t, timeout, mine.data(), sizes, out.data(), a);
  });
  return {below[0], below[1]};
}

}  // namespace exdyna::comm
