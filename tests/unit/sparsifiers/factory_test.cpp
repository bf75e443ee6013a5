// make_error_feedback (sparsifiers/factory.hpp): the one way simulate, train and the engine tests
// build an error-feedback sparsifier. It must refuse an unknown name once, listing the known ones,
// refuse bad options naming the value, and build the sparsifier on the n_g, world size and rank
// it was given.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "unit/expect_error.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;

namespace {

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(Factory, UnknownSparsifierIsRefusedOnceListingTheKnownNames) {
  const auto reg = builtin_registry();
  SparsifierConfig opt;
  opt.density = 0.1;
  for (const auto& refuse : std::vector<std::function<void()>>{
           [&] { make_error_feedback("top-k-ish", opt, 97, 1, 0, reg); },
           [&] { check_sparsifier(reg, "top-k-ish", bind(opt, 97, 1, 0)); },
           [&] { reg.require("top-k-ish"); }}) {
    try {
      refuse();
      ADD_FAILURE() << "no exception";
    } catch (const InvalidArgument& e) {
      const std::string msg = e.what();
      EXPECT_EQ(occurrences(msg, "unknown sparsifier 'top-k-ish'"), 1u) << msg;
      EXPECT_EQ(occurrences(msg, "expected one of"), 1u) << msg;
      for (const auto& name : reg.names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
    }
  }
  // The name is checked before the options: a bad density does not hide an unknown name.
  opt.density = 0;
  expect_error<InvalidArgument>([&] { make_error_feedback("nope", opt, 97, 1, 0, reg); },
                                {"unknown sparsifier 'nope'"});
}

TEST(Factory, BadOptionsAreRefusedNamingTheValue) {
  const auto reg = builtin_registry();
  for (const auto& name : reg.names()) {
    SCOPED_TRACE(name);
    SparsifierConfig opt;
    opt.density = 1.5;
    expect_error<InvalidArgument>([&] { make_error_feedback(name, opt, 97, 1, 0, reg); },
                                  {"density 1.5", "(0, 1]"});
    expect_error<InvalidArgument>([&] { check_sparsifier(reg, name, bind(opt, 97, 1, 0)); },
                                  {"density 1.5", "(0, 1]"});
    opt.density = 0.1;
    // What the factory binds is validated too.
    expect_error<InvalidArgument>([&] { make_error_feedback(name, opt, 97, 3, 3, reg); },
                                  {"rank 3", "[0, 3)"});
    expect_error<InvalidArgument>([&] { make_error_feedback(name, opt, 0, 1, 0, reg); },
                                  {"n_g (--n-grad) 0"});
  }
}

TEST(Factory, BindsNgWorldSizeAndRank) {
  const auto reg = builtin_registry();
  SparsifierConfig opt;
  opt.density = 0.1;
  opt.n_g = 5;  // the factory's arguments win over whatever the options held
  opt.world_size = 7;
  opt.rank = 6;
  const auto bound = bind(opt, 960, 3, 2);
  EXPECT_EQ(bound.n_g, 960);
  EXPECT_EQ(bound.world_size, 3);
  EXPECT_EQ(bound.rank, 2);
  EXPECT_EQ(bound.density, 0.1);

  // ExDyna: each rank selects only inside its own partition, so the gathered set covers every
  // third of the gradient only if every rank was built with its own rank.
  const std::int64_t n_g = 960;
  std::mutex mu;
  std::vector<Index> indices;
  comm::run_local(3, [&](comm::Communicator& c) {
    auto ef = make_error_feedback("exdyna", opt, n_g, c.size(), c.rank(), reg);
    EXPECT_EQ(ef.residual().size(), static_cast<std::size_t>(n_g));
    const std::string fp = ef.sparsifier().fingerprint();
    EXPECT_NE(fp.find(";n_g=960;world_size=3;"), std::string::npos) << fp;
    std::vector<float> grad(static_cast<std::size_t>(n_g));
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = 1.0f + static_cast<float>(i % 17);
    const auto st = ef.step(grad, c);
    EXPECT_EQ(st.world_size, 3);
    EXPECT_EQ(st.n_g, n_g);
    if (c.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      indices = ef.last_result().indices;
    }
  });
  ASSERT_FALSE(indices.empty());
  for (std::int64_t third = 0; third < 3; ++third)
    EXPECT_TRUE(std::any_of(indices.begin(), indices.end(),
                            [&](Index i) { return static_cast<std::int64_t>(i) / 320 == third; }))
        << "nothing gathered from partition " << third;
}
