// Short multi-rank training runs on a tiny model and a synthetic dataset over the in-process
// group: the loss falls, ranks hold bit-identical parameters after every step, and a run stopped
// at a checkpoint and resumed ends bit-identical to an uninterrupted one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/train/dgc_momentum.hpp"
#include "exdyna/train/trainer.hpp"
#include "train_fixtures.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace fs = std::filesystem;
using namespace exdyna;
using namespace exdyna::train;
using exdyna::train::fixtures::have;
using exdyna::train::fixtures::train_on_ranks;

namespace {

std::uint64_t hash(std::span<const float> v) {
  return core::fnv1a(std::as_bytes(v));
}

// The tiny model with Nesterov momentum, weight decay and a short warm-up.
TrainOptions tiny_options(const std::string& sparsifier) {
  TrainOptions o = fixtures::tiny_options(sparsifier);
  o.sgd.lr = 0.05;
  o.sgd.momentum = 0.9;
  o.sgd.nesterov = true;
  o.sgd.weight_decay = 1e-4;
  o.schedule.warmup_epochs = 0.2;
  return o;
}

DataBundle tiny_data() {
  return fixtures::tiny_data(768, 128);
}

std::vector<std::string> sparsifiers_to_test() {
  std::vector<std::string> v{"dense"};
  for (const char* s : {"exdyna", "topk", "cltk"})
    if (have(s)) v.push_back(s);
  return v;
}

}  // namespace

// Each test's own directory (for the runs that write one), removed when it ends.
using Training = TempDirTest;

TEST_F(Training, LossFallsAndRanksAgreeAfterEveryStep) {
  set_torch_threads(1);
  const auto data = tiny_data();
  for (const auto& sp : sparsifiers_to_test()) {
    SCOPED_TRACE(sp);
    const int world = 4;
    auto o = tiny_options(sp);
    o.epochs = 2;  // 768 / 4 / 16 = 12 steps per epoch
    std::mutex mu;
    std::map<std::int64_t, std::vector<std::uint64_t>> hashes;
    std::vector<TrainResult> results(world);
    comm::run_local(world, [&](comm::Communicator& c) {
      results[static_cast<std::size_t>(c.rank())] =
          train_worker(o, c, &data, [&](int rank, std::int64_t step, std::span<const float> p) {
            std::lock_guard<std::mutex> lock(mu);
            auto& h = hashes[step];
            h.resize(world);
            h[static_cast<std::size_t>(rank)] = hash(p);
          });
    });
    ASSERT_EQ(hashes.size(), 24u);
    for (const auto& [step, h] : hashes)
      for (int r = 1; r < world; ++r)
        ASSERT_EQ(h[static_cast<std::size_t>(r)], h[0]) << "step " << step << " rank " << r;
    const auto& r0 = results[0];
    EXPECT_LT(r0.last_train_loss, 0.7 * r0.first_train_loss)
        << r0.first_train_loss << " -> " << r0.last_train_loss;
    EXPECT_GT(r0.test_accuracy, 0.5);
    EXPECT_EQ(r0.log.iters().size(), 24u);
    for (int r = 1; r < world; ++r)
      EXPECT_EQ(results[static_cast<std::size_t>(r)].test_accuracy, r0.test_accuracy);
  }
}

TEST_F(Training, ResumeIsBitIdenticalToUninterruptedRun) {
  set_torch_threads(1);
  const auto data = tiny_data();
  const std::string sp = have("exdyna") ? "exdyna" : "dense";
  const int world = 3;
  auto run = [&](TrainOptions o) {
    std::vector<std::vector<float>> params(world);
    comm::run_local(world, [&](comm::Communicator& c) {
      params[static_cast<std::size_t>(c.rank())] = train_worker(o, c, &data).params;
    });
    return params;
  };
  auto base = tiny_options(sp);
  base.epochs = 2;  // 768 / 3 / 16 = 16 steps per epoch: the cut at 10 is mid-epoch
  const auto full = run(base);

  auto first = base;
  first.out_dir = (dir_ / "a").string();
  first.checkpoint_every = 5;
  // The "kill": the run stops at step 12, past its last checkpoint (step 10), so resuming from
  // step 10 must reproduce steps 11 and 12 exactly and then go on.
  first.max_steps = 12;
  run(first);
  ASSERT_TRUE(fs::exists(dir_ / "a" / "checkpoints" / "latest"));
  auto second = base;
  second.resume = (dir_ / "a" / "checkpoints" / "step-10").string();
  const auto resumed = run(second);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(full[static_cast<std::size_t>(r)].size(),
              resumed[static_cast<std::size_t>(r)].size());
    EXPECT_EQ(std::memcmp(full[static_cast<std::size_t>(r)].data(),
                          resumed[static_cast<std::size_t>(r)].data(),
                          full[static_cast<std::size_t>(r)].size() * sizeof(float)),
              0)
        << "rank " << r << " differs after resume";
  }
  // Resuming through the output directory follows `latest` (the step-10 checkpoint).
  auto third = base;
  third.resume = (dir_ / "a").string();
  const auto resumed2 = run(third);
  EXPECT_EQ(std::memcmp(full[0].data(), resumed2[0].data(), full[0].size() * sizeof(float)), 0);
  // A different configuration is refused.
  auto bad = base;
  bad.batch_size = 8;
  bad.resume = (dir_ / "a").string();
  EXPECT_THROW(run(bad), InvalidArgument);
}

TEST_F(Training, WritesCsvSummaryAndPlots) {
  set_torch_threads(1);
  const auto data = tiny_data();
  auto o = tiny_options(have("exdyna") ? "exdyna" : "dense");
  o.out_dir = dir_.string();
  o.plots = true;
  TrainResult r0;
  comm::run_local(2, [&](comm::Communicator& c) {
    auto r = train_worker(o, c, &data);
    if (c.rank() == 0) r0 = r;
  });
  EXPECT_TRUE(fs::exists(dir_ / "iterations.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "eval.csv"));
  EXPECT_TRUE(fs::exists(dir_ / "summary.json"));
  for (const auto& f : r0.files) EXPECT_TRUE(fs::exists(f)) << f;
  // No temp files left behind by the atomic writes.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

// `--record-trace` relies on this: the gradient hook sees each rank's own raw gradient (dense, and
// different on every rank), once per step, before error feedback turns the buffer into the sparse
// update that is identical on every rank.
TEST_F(Training, GradientHookSeesTheRawLocalGradientOncePerStep) {
  const auto data = tiny_data();
  auto o = tiny_options("exdyna");
  o.max_steps = 3;
  std::mutex mu;
  std::map<std::pair<int, std::int64_t>, std::vector<float>> seen;
  std::int64_t n_g = 0;
  comm::run_local(2, [&](comm::Communicator& c) {
    const int rank = c.rank();
    const auto r = train_worker(o, c, &data, {}, [&](std::int64_t step, std::span<const float> g) {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_TRUE(
          seen.emplace(std::pair{rank, step}, std::vector<float>(g.begin(), g.end())).second)
          << "step " << step << " seen twice on rank " << rank;
    });
    std::lock_guard<std::mutex> lock(mu);
    n_g = r.n_g;
  });
  ASSERT_EQ(seen.size(), 6u);
  for (std::int64_t step = 0; step < 3; ++step) {
    const auto& a = seen.at({0, step});
    const auto& b = seen.at({1, step});
    ASSERT_EQ(static_cast<std::int64_t>(a.size()), n_g);
    EXPECT_NE(a, b) << "step " << step << ": the ranks' local gradients should differ";
    const auto nonzero = std::count_if(a.begin(), a.end(), [](float v) { return v != 0; });
    EXPECT_GT(nonzero, n_g / 2) << "step " << step << ": not the dense raw gradient (density 0.05)";
  }
}

// `--sparsifier dgc` trains with DGC's momentum correction (train/dgc_momentum.hpp): the loss
// falls, every rank holds the same parameters, the velocity rides in the checkpoint (a resumed
// run is bit-identical), and --nesterov is refused with it.
TEST_F(Training, DgcWithMomentumCorrectionTrainsAndResumesExactly) {
  set_torch_threads(1);
  const auto data = tiny_data();
  const int world = 3;
  auto o = tiny_options("dgc");
  o.sgd.nesterov = false;
  o.epochs = 2;
  auto run = [&](const TrainOptions& opts) { return train_on_ranks(opts, world, data); };
  const auto full = run(o);
  EXPECT_LT(full[0].last_train_loss, 0.7 * full[0].first_train_loss)
      << full[0].first_train_loss << " -> " << full[0].last_train_loss;
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(full[static_cast<std::size_t>(r)].params, full[0].params);
  auto first = o;
  first.out_dir = (dir_ / "a").string();
  first.checkpoint_every = 5;
  first.max_steps = 12;
  run(first);
  auto second = o;
  second.resume = (dir_ / "a" / "checkpoints" / "step-10").string();
  const auto resumed = run(second);
  EXPECT_EQ(resumed[0].params, full[0].params);
  auto nesterov = o;
  nesterov.sgd.nesterov = true;
  EXPECT_THROW(nesterov.validate(), InvalidArgument);
}

// `--sparsifier dgc --dgc-warmup-epochs 2 --dgc-warmup-start 0.5` at d = 0.05 on 3 ranks, 16 steps
// per epoch: every step reports the target of its epoch (0.5, 0.158, then 0.05) and selects about
// that many per worker, ranks agree, and a resume from inside the warm-up (step 10, epoch 1) or
// from its second epoch (step 20) ends bit-identical; a resume without the warm-up is refused.
TEST_F(Training, DgcDensityWarmUpFollowsItsScheduleAndResumesExactly) {
  set_torch_threads(1);
  const auto data = tiny_data();
  const int world = 3;
  auto o = tiny_options("dgc");
  o.sgd.nesterov = false;
  o.epochs = 3;  // 768 / 3 / 16 = 16 steps per epoch
  o.dgc_warmup_epochs = 2;
  o.dgc_warmup_start = 0.5;
  auto run = [&](const TrainOptions& opts) { return train_on_ranks(opts, world, data); };
  const auto full = run(o);
  const auto& iters = full[0].log.iters();
  ASSERT_EQ(iters.size(), 48u);
  const double n_g = static_cast<double>(full[0].n_g);
  std::vector<double> epoch_mean(3, 0.0);
  for (std::size_t i = 0; i < iters.size(); ++i) {
    const auto& st = iters[i].stats;
    const double want = dgc_warmup_density(static_cast<std::int64_t>(i / 16), 2, 0.5, 0.05);
    ASSERT_EQ(st.target_density, want) << "step " << i;
    EXPECT_EQ(st.k_target, static_cast<std::int64_t>(std::floor(want * n_g))) << "step " << i;
    // k' sums the workers' counts: each about k (fewer may pass; at most 4k/3 unrefined).
    EXPECT_GE(st.density, 0.25 * want) << "step " << i;
    EXPECT_LE(st.density, world * 4.0 / 3.0 * want + 1 / n_g) << "step " << i;
    epoch_mean[i / 16] += st.density / 16;
  }
  EXPECT_EQ(iters.back().stats.target_density, 0.05);  // exactly --density after the warm-up
  EXPECT_GT(epoch_mean[0], 2 * epoch_mean[1]);
  EXPECT_GT(epoch_mean[1], 2 * epoch_mean[2]);
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(full[static_cast<std::size_t>(r)].params, full[0].params);
  EXPECT_LT(full[0].last_train_loss, full[0].first_train_loss);

  auto first = o;
  first.out_dir = (dir_ / "a").string();
  first.checkpoint_every = 10;
  first.max_steps = 22;
  run(first);
  for (const char* step : {"step-10", "step-20"}) {
    SCOPED_TRACE(step);
    auto again = o;
    again.resume = (dir_ / "a" / "checkpoints" / step).string();
    const auto resumed = run(again);
    for (int r = 0; r < world; ++r) {
      const auto& a = full[static_cast<std::size_t>(r)].params;
      const auto& b = resumed[static_cast<std::size_t>(r)].params;
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "rank " << r;
    }
    // The resumed run sets the density of the epoch it resumes in.
    const auto& it = resumed[0].log.iters();
    ASSERT_FALSE(it.empty());
    EXPECT_EQ(it.front().stats.target_density, iters[it.front().step - 1].stats.target_density);
  }
  // The warm-up is part of the configuration: a resume without it, or with another start, is
  // refused.
  for (const auto& [epochs, start] : {std::pair<std::int64_t, double>{0, 0.25}, {2, 0.4}}) {
    auto other = o;
    other.dgc_warmup_epochs = epochs;
    other.dgc_warmup_start = start;
    other.resume = (dir_ / "a" / "checkpoints" / "step-20").string();
    EXPECT_THROW(run(other), InvalidArgument) << epochs << " " << start;
  }
  // Only DGC warms up its density.
  auto topk = o;
  topk.sparsifier = "topk";
  topk.sgd.nesterov = false;
  EXPECT_THROW(topk.validate(), InvalidArgument);
}
