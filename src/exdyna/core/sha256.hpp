// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the job token's challenge-response: each
// rank proves it knows the shared secret without sending it. Not a general crypto library: no
// constant-time claims beyond the comparison helper, no streaming API beyond what the proof needs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace exdyna::core {

using Sha256Digest = std::array<std::uint8_t, 32>;

Sha256Digest sha256(std::string_view data);
Sha256Digest hmac_sha256(std::string_view key, std::string_view message);
// Lower-case hexadecimal, 64 characters.
std::string to_hex(const Sha256Digest& d);
// Compares without an early exit, so the time taken does not tell how many leading bytes matched.
bool equal_constant_time(std::string_view a, std::string_view b);

}  // namespace exdyna::core
