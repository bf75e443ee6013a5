// The startup configuration check on the in-process group: agreement passes silently on every
// world size; a disagreement is refused on every rank with the field and the ranks named.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "exdyna/comm/fingerprint.hpp"
#include "exdyna/comm/local_group.hpp"
#include "exdyna/sparsifiers/config.hpp"

namespace exdyna::comm {
namespace {

TEST(Fingerprint, SplitsOptionListsIntoNamedFields) {
  Fingerprint fp;
  fp.add("engine", "mpi").add("sparsifier", "topk;density=0.01;n_g=100");
  const auto& f = fp.fields();
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0], (std::pair<std::string, std::string>{"engine", "mpi"}));
  EXPECT_EQ(f[1], (std::pair<std::string, std::string>{"sparsifier", "topk"}));
  EXPECT_EQ(f[2], (std::pair<std::string, std::string>{"sparsifier.density", "0.01"}));
  EXPECT_EQ(f[3], (std::pair<std::string, std::string>{"sparsifier.n_g", "100"}));
  EXPECT_EQ(Fingerprint::parse(fp.serialize()).fields(), f);
}

TEST(Fingerprint, EqualConfigurationsPassAndLeaveCountersClean) {
  for (int n = 1; n <= 6; ++n) {
    std::atomic<int> ok{0};
    run_local(n, [&](Communicator& c) {
      sparsifiers::SparsifierConfig cfg;
      cfg.n_g = 1000;
      cfg.world_size = c.size();
      Fingerprint fp;
      fp.add("config", cfg.fingerprint()).add("seed", "7");
      check_same_configuration(c, fp);
      EXPECT_EQ(c.bytes().total(), 0u);
      ++ok;
    });
    EXPECT_EQ(ok.load(), n);
  }
}

TEST(Fingerprint, MismatchIsRefusedOnEveryRankNamingFieldAndRanks) {
  const int n = 5;
  std::atomic<int> refused{0};
  run_local(n, [&](Communicator& c) {
    sparsifiers::SparsifierConfig cfg;
    cfg.n_g = 1000;
    cfg.world_size = n;
    cfg.density = c.rank() == 3 ? 0.02 : 0.01;
    Fingerprint fp;
    fp.add("config", cfg.fingerprint());
    if (c.rank() != 4) fp.add("trace", "a");  // rank 4 lacks a field
    try {
      check_same_configuration(c, fp);
      ADD_FAILURE() << "rank " << c.rank() << " accepted a mismatched configuration";
    } catch (const InvalidArgument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("config.density is '0.01' on ranks 0,1,2,4 but '0.02' on rank 3"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("trace is 'a' on ranks 0,1,2,3 but '(absent)' on rank 4"), std::string::npos)
          << m;
      EXPECT_EQ(m.find("n_g"), std::string::npos) << m;  // equal fields are not mentioned
      ++refused;
    }
  });
  EXPECT_EQ(refused.load(), n);
}

}  // namespace
}  // namespace exdyna::comm
