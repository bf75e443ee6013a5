// The job token's challenge-response on an in-memory store with one thread per rank: a job whose
// ranks share the token starts; a rank without it, with another token, or a second process
// claiming a rank stops every rank with the rank named; a silent rank is named after the timeout.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../expect_error.hpp"
#include "exdyna/comm/job_token.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::comm {
namespace {

class MemoryStore final : public ProofStore {
 public:
  void set(const std::string& k, const std::string& v) override {
    std::lock_guard<std::mutex> g(m_);
    kv_[k] = v;
  }
  bool has(const std::string& k) override {
    std::lock_guard<std::mutex> g(m_);
    return kv_.count(k) > 0;
  }
  std::string get(const std::string& k) override {
    std::lock_guard<std::mutex> g(m_);
    return kv_.at(k);
  }
  std::int64_t add(const std::string& k, std::int64_t d) override {
    std::lock_guard<std::mutex> g(m_);
    auto& v = kv_[k];
    const std::int64_t now = (v.empty() ? 0 : std::stoll(v)) + d;
    v = std::to_string(now);
    return now;
  }

 private:
  std::mutex m_;
  std::map<std::string, std::string> kv_;
};

const std::string kToken = "0123456789abcdef0123456789abcdef";

// Runs one prove_membership per entry of `tokens` (rank = index); returns each rank's error (""
// ok).
std::vector<std::string> run_job(MemoryStore& store, const std::vector<std::string>& tokens,
                                 std::vector<bool>* secured = nullptr,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const int n = static_cast<int>(tokens.size());
  std::vector<std::string> errors(tokens.size());
  std::vector<bool> sec(tokens.size());
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        sec[r] = prove_membership(store, r, n, tokens[r], timeout).secured;
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  if (secured) *secured = sec;
  return errors;
}

TEST(JobToken, SharedTokenStarts) {
  MemoryStore store;
  std::vector<bool> secured;
  const auto errors = run_job(store, {kToken, kToken, kToken, kToken}, &secured);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(errors[r], "") << r;
    EXPECT_TRUE(secured[r]) << r;
  }
}

TEST(JobToken, NoTokenAnywhereStartsUnsecured) {
  MemoryStore store;
  std::vector<bool> secured;
  const auto errors = run_job(store, {"", "", ""}, &secured);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[r], "");
    EXPECT_FALSE(secured[r]);
  }
}

TEST(JobToken, RankWithoutTokenIsNamedOnEveryRank) {
  MemoryStore store;
  const auto errors = run_job(store, {kToken, kToken, "", kToken});
  for (int r : {0, 1, 3}) {
    EXPECT_NE(errors[r].find("rank 2 had no EXDYNA_JOB_TOKEN"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("refusing to start"), std::string::npos);
  }
  EXPECT_NE(errors[2].find("rank 2 has no EXDYNA_JOB_TOKEN but others prove one"),
            std::string::npos)
      << errors[2];
}

TEST(JobToken, OtherTokenIsNamed) {
  MemoryStore store;
  const auto errors = run_job(store, {kToken, "another-token-of-16+chars", kToken});
  EXPECT_NE(errors[0].find("rank 1 proved another token"), std::string::npos) << errors[0];
  EXPECT_NE(errors[2].find("rank 1 proved another token"), std::string::npos) << errors[2];
  // Rank 1 sees everyone else as the stranger: it stops too.
  EXPECT_NE(errors[1].find("ranks 0,2 proved another token"), std::string::npos) << errors[1];
}

TEST(JobToken, ProofCannotBeReplayedOnAnotherJobOrRank) {
  // A proof copied from one job is wrong for the next nonce, and for another rank.
  const auto p = membership_proof(kToken, "nonce-a", 1);
  EXPECT_NE(p, membership_proof(kToken, "nonce-b", 1));
  EXPECT_NE(p, membership_proof(kToken, "nonce-a", 2));
  EXPECT_EQ(p, membership_proof(kToken, "nonce-a", 1));
  EXPECT_EQ(p.size(), 64u);
  EXPECT_EQ(p.find(kToken), std::string::npos);  // the token never travels
  EXPECT_EQ(membership_proof("", "nonce-a", 1), "none");
}

TEST(JobToken, SecondClaimOfARankIsNamed) {
  MemoryStore store;
  store.add("exdyna/auth/claim/1", 1);  // a stranger that connected first and claimed rank 1
  const auto errors = run_job(store, {kToken, kToken, kToken});
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(errors[r].find("rank 1 claimed by more than one process"), std::string::npos)
        << errors[r];
}

TEST(JobToken, SilentRankIsNamedAfterTheTimeout) {
  MemoryStore store;
  // World of 3, only ranks 0 and 1 run.
  std::string err0, err1;
  std::thread a([&] {
    try {
      prove_membership(store, 0, 3, kToken, std::chrono::milliseconds(300));
    } catch (const TimeoutError& e) {
      err0 = e.what();
    }
  });
  try {
    prove_membership(store, 1, 3, kToken, std::chrono::milliseconds(300));
  } catch (const TimeoutError& e) {
    err1 = e.what();
  }
  a.join();
  EXPECT_NE(err0.find("rank 2 posted no proof"), std::string::npos) << err0;
  EXPECT_NE(err1.find("rank 2 posted no proof"), std::string::npos) << err1;
}

TEST(JobToken, ShortTokenFromEnvironmentIsRefused) {
  ::setenv("EXDYNA_JOB_TOKEN", "short", 1);
  expect_error<InvalidArgument>([] { job_token_from_env(); },
                                {"EXDYNA_JOB_TOKEN has 5 characters", "at least 16"});
  ::setenv("EXDYNA_JOB_TOKEN", kToken.c_str(), 1);
  EXPECT_EQ(job_token_from_env(), kToken);
  ::unsetenv("EXDYNA_JOB_TOKEN");
  EXPECT_EQ(job_token_from_env(), "");
  const auto g = generate_job_token();
  EXPECT_EQ(g.size(), 64u);
  EXPECT_NE(g, generate_job_token());
}

}  // namespace
}  // namespace exdyna::comm
