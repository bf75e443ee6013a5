#include "exdyna/comm/job_token.hpp"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/core/sha256.hpp"

namespace exdyna::comm {

namespace {

const std::string kPrefix = "exdyna/auth/";
constexpr std::size_t kMinTokenLength = 16;

std::string random_hex(int bytes) {
  std::random_device dev;  // /dev/urandom with libstdc++ on Linux
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < bytes; i += 4) {
    std::uint32_t v = dev();
    for (int j = 0; j < 4 && i + j < bytes; ++j, v >>= 8) {
      s += kHex[(v >> 4) & 15];
      s += kHex[v & 15];
    }
  }
  return s;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

using Clock = std::chrono::steady_clock;

// Polls until every key of `keys` exists or the deadline passes; returns the indices still missing.
std::vector<int> wait_for(ProofStore& store, const std::vector<std::string>& keys,
                          Clock::time_point deadline) {
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (!store.has(keys[i])) missing.push_back(static_cast<int>(i));
    if (missing.empty() || Clock::now() >= deadline) return missing;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

std::string job_token_from_env() {
  const char* v = std::getenv("EXDYNA_JOB_TOKEN");
  if (!v || !*v) return "";
  const std::string t(v);
  EXDYNA_CHECK_ARG(t.size() >= kMinTokenLength, "EXDYNA_JOB_TOKEN has ", t.size(),
                   " characters; expected at least ", kMinTokenLength,
                   " (e.g. `openssl rand -hex 32`), or leave it unset");
  return t;
}

std::string generate_job_token() {
  return random_hex(32);
}

std::string membership_proof(const std::string& token, const std::string& nonce, int rank) {
  if (token.empty()) return "none";
  return core::to_hex(core::hmac_sha256(token, "exdyna-job/" + nonce + "/" + std::to_string(rank)));
}

MembershipResult prove_membership(ProofStore& store, int rank, int world_size,
                                  const std::string& token, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const auto secs = [&] { return std::to_string(timeout.count() / 1000.0) + " s"; };
  if (rank == 0) store.set(kPrefix + "nonce", random_hex(16));
  if (!wait_for(store, {kPrefix + "nonce"}, deadline).empty())
    throw TimeoutError(detail::concat("job token check: rank ", rank,
                                      " saw no challenge from rank 0 within ", secs()));
  const std::string nonce = store.get(kPrefix + "nonce");
  store.add(kPrefix + "claim/" + std::to_string(rank), 1);
  store.set(kPrefix + "proof/" + std::to_string(rank), membership_proof(token, nonce, rank));

  std::vector<std::string> keys;
  for (int r = 0; r < world_size; ++r) keys.push_back(kPrefix + "proof/" + std::to_string(r));
  const auto missing = wait_for(store, keys, deadline);
  if (!missing.empty())
    throw TimeoutError(detail::concat("job token check: ", rank_list(missing),
                                      " posted no proof within ", secs(),
                                      " (not started, or not reaching the store)"));

  std::vector<int> none, wrong, doubled;
  for (int r = 0; r < world_size; ++r) {
    const std::string proof = store.get(keys[static_cast<std::size_t>(r)]);
    if (store.add(kPrefix + "claim/" + std::to_string(r), 0) > 1) doubled.push_back(r);
    if (proof == "none")
      none.push_back(r);
    else if (!core::equal_constant_time(proof, membership_proof(token, nonce, r)))
      wrong.push_back(r);
  }
  // Rank 0 serves the store: it stays until every rank has read the proofs (bounded), so each
  // rank reports the verdict itself rather than a lost store.
  store.add(kPrefix + "checked", 1);
  const auto linger = std::min(deadline, Clock::now() + std::chrono::seconds(5));
  while (rank == 0 && store.add(kPrefix + "checked", 0) < world_size && Clock::now() < linger)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (token.empty() && static_cast<int>(none.size()) == world_size && doubled.empty())
    return {false};
  if (!token.empty() && none.empty() && wrong.empty() && doubled.empty()) return {true};
  std::string why;
  const auto add = [&](const std::vector<int>& ranks, const std::string& what) {
    if (!ranks.empty()) why += (why.empty() ? "" : "; ") + rank_list(ranks) + " " + what;
  };
  if (token.empty()) {
    why = detail::concat("rank ", rank, " has no EXDYNA_JOB_TOKEN but others prove one");
  } else {
    add(none, "had no EXDYNA_JOB_TOKEN");
    add(wrong, "proved another token (a different EXDYNA_JOB_TOKEN, or not a process of this job)");
  }
  add(doubled, "claimed by more than one process");
  throw CommError(
      detail::concat("job token check failed, refusing to start (seen by rank ", rank, "): ", why,
                     ". Give every rank the same EXDYNA_JOB_TOKEN (docs/reliability.md)"));
}

}  // namespace exdyna::comm
