// Who may join a job. The rendezvous store of libtorch 1.13 (c10d::TCPStore) listens on every
// interface and lets any process that connects take part. Before the ranks build their mesh, each
// proves it knows the job's shared secret (EXDYNA_JOB_TOKEN; the local launcher and `exdyna
// compare` generate one) by a challenge-response through the store:
//   1. rank 0 posts a fresh random nonce;
//   2. every rank posts HMAC-SHA-256(token, "exdyna-job/<nonce>/<rank>") under its rank, and counts
//      itself in a per-rank claim counter;
//   3. every rank waits for all proofs and checks each against its own token and nonce.
// A rank without the token, with another token, a second process claiming a rank, or a tampered
// nonce: every rank refuses to start and names the rank(s). The token itself never travels, and a
// proof is useless for another job (fresh nonce) or another rank (rank in the message).
// When no rank has a token, the check passes (and the caller warns): the store is open as before.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace exdyna::comm {

// The few store operations the proof needs; the Gloo engine adapts c10d::Store, tests a map.
class ProofStore {
 public:
  virtual ~ProofStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual bool has(const std::string& key) = 0;
  virtual std::string get(const std::string& key) = 0;  // only called after has() was true
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
};

// The token from EXDYNA_JOB_TOKEN ("" when unset). Throws InvalidArgument when it is set but
// shorter than 16 characters (a guessable secret is worse than a visible warning).
std::string job_token_from_env();

// 64 hexadecimal characters from the system's random device: what launchers put into
// EXDYNA_JOB_TOKEN when the user did not.
std::string generate_job_token();

// The proof rank `rank` posts for `nonce` ("none" without a token).
std::string membership_proof(const std::string& token, const std::string& nonce, int rank);

struct MembershipResult {
  bool secured = false;  // true when the ranks proved a token; false when nobody had one
};

// Collective over the store (every rank of the job calls it before building its communicator).
// Throws CommError naming the rank(s) on a refusal, TimeoutError naming the ranks that did not post
// a proof within `timeout`.
MembershipResult prove_membership(ProofStore& store, int rank, int world_size,
                                  const std::string& token, std::chrono::milliseconds timeout);

}  // namespace exdyna::comm
