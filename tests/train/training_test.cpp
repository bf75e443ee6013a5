// Short multi-rank training runs on a tiny model and a synthetic dataset over the in-process
// group: the loss falls, ranks hold bit-identical parameters after every step, and a run stopped
// at a checkpoint and resumed ends bit-identical to an uninterrupted one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/train/trainer.hpp"

namespace fs = std::filesystem;
using namespace exdyna;
using namespace exdyna::train;

namespace {

std::uint64_t hash(std::span<const float> v) {
  return core::fnv1a(std::as_bytes(v));
}

DataBundle tiny_data() {
  DataBundle b;
  b.train_images = std::make_shared<ImageDataset>(synthetic_image_dataset(768, 4, 1, 8, 8, 1));
  b.test_images = std::make_shared<ImageDataset>(synthetic_image_dataset(128, 4, 1, 8, 8, 2));
  return b;
}

TrainOptions tiny_options(const std::string& sparsifier) {
  TrainOptions o;
  o.model = "tiny";
  o.dataset = "synthetic";
  o.sparsifier = sparsifier;
  o.sparse.density = 0.05;
  o.epochs = 1;
  o.batch_size = 16;
  o.sgd.lr = 0.05;
  o.sgd.momentum = 0.9;
  o.sgd.nesterov = true;
  o.sgd.weight_decay = 1e-4;
  o.schedule.warmup_epochs = 0.2;
  o.progress = false;
  o.plots = false;
  return o;
}

bool have(const std::string& name) {
  const auto names = sparsifiers::builtin_registry().names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> sparsifiers_to_test() {
  std::vector<std::string> v{"dense"};
  for (const char* s : {"exdyna", "topk", "cltk"})
    if (have(s)) v.push_back(s);
  return v;
}

}  // namespace

TEST(Training, LossFallsAndRanksAgreeAfterEveryStep) {
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

TEST(Training, ResumeIsBitIdenticalToUninterruptedRun) {
  set_torch_threads(1);
  const auto data = tiny_data();
  const std::string sp = have("exdyna") ? "exdyna" : "dense";
  const int world = 3;
  const auto dir = fs::temp_directory_path() / ("exdyna-resume-" + std::to_string(::getpid()));
  fs::remove_all(dir);
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
  first.out_dir = (dir / "a").string();
  first.checkpoint_every = 5;
  // The "kill": the run stops at step 12, past its last checkpoint (step 10), so resuming from
  // step 10 must reproduce steps 11 and 12 exactly and then go on.
  first.max_steps = 12;
  run(first);
  ASSERT_TRUE(fs::exists(dir / "a" / "checkpoints" / "latest"));
  auto second = base;
  second.resume = (dir / "a" / "checkpoints" / "step-10").string();
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
  third.resume = (dir / "a").string();
  const auto resumed2 = run(third);
  EXPECT_EQ(std::memcmp(full[0].data(), resumed2[0].data(), full[0].size() * sizeof(float)), 0);
  // A different configuration is refused.
  auto bad = base;
  bad.batch_size = 8;
  bad.resume = (dir / "a").string();
  EXPECT_THROW(run(bad), InvalidArgument);
  fs::remove_all(dir);
}

TEST(Training, WritesCsvSummaryAndPlots) {
  set_torch_threads(1);
  const auto data = tiny_data();
  const auto dir = fs::temp_directory_path() / ("exdyna-out-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto o = tiny_options(have("exdyna") ? "exdyna" : "dense");
  o.out_dir = dir.string();
  o.plots = true;
  TrainResult r0;
  comm::run_local(2, [&](comm::Communicator& c) {
    auto r = train_worker(o, c, &data);
    if (c.rank() == 0) r0 = r;
  });
  EXPECT_TRUE(fs::exists(dir / "iterations.csv"));
  EXPECT_TRUE(fs::exists(dir / "eval.csv"));
  EXPECT_TRUE(fs::exists(dir / "summary.json"));
  for (const auto& f : r0.files) EXPECT_TRUE(fs::exists(f)) << f;
  // No temp files left behind by the atomic writes.
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  fs::remove_all(dir);
}

// `--record-trace` relies on this: the gradient hook sees each rank's own raw gradient (dense, and
// different on every rank), once per step, before error feedback turns the buffer into the sparse
// update that is identical on every rank.
TEST(Training, GradientHookSeesTheRawLocalGradientOncePerStep) {
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
TEST(Training, DgcWithMomentumCorrectionTrainsAndResumesExactly) {
  set_torch_threads(1);
  const auto data = tiny_data();
  const int world = 3;
  auto o = tiny_options("dgc");
  o.sgd.nesterov = false;
  o.epochs = 2;
  const auto dir = fs::temp_directory_path() / ("exdyna-dgc-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto run = [&](const TrainOptions& opts) {
    std::vector<TrainResult> res(world);
    comm::run_local(world, [&](comm::Communicator& c) {
      res[static_cast<std::size_t>(c.rank())] = train_worker(opts, c, &data);
    });
    return res;
  };
  const auto full = run(o);
  EXPECT_LT(full[0].last_train_loss, 0.7 * full[0].first_train_loss)
      << full[0].first_train_loss << " -> " << full[0].last_train_loss;
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(full[static_cast<std::size_t>(r)].params, full[0].params);
  auto first = o;
  first.out_dir = (dir / "a").string();
  first.checkpoint_every = 5;
  first.max_steps = 12;
  run(first);
  auto second = o;
  second.resume = (dir / "a" / "checkpoints" / "step-10").string();
  const auto resumed = run(second);
  EXPECT_EQ(resumed[0].params, full[0].params);
  fs::remove_all(dir);
  auto nesterov = o;
  nesterov.sgd.nesterov = true;
  EXPECT_THROW(nesterov.validate(), InvalidArgument);
}
