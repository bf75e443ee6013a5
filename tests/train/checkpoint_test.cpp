// Checkpoints refuse what they cannot trust: a truncated file, one flipped bit anywhere, the old
// format, and a resume by another rank count, sparsifier, sparsifier option or model. Each refusal
// names the file and the reason, reaches every rank, and leaves every file byte-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/train/checkpoint.hpp"
#include "exdyna/train/trainer.hpp"
#include "train_fixtures.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace fs = std::filesystem;
using namespace exdyna;
using namespace exdyna::train;
using namespace exdyna::train::fixtures;

namespace {

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Every file under dir with its content.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) m[e.path().string()] = read_file(e.path());
  return m;
}

// The DataError load_checkpoint_file throws for path ("" when it loads).
std::string refusal_of(const fs::path& path) {
  try {
    load_checkpoint_file(path.string());
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

CheckpointState small_state() {
  CheckpointState s;
  s.fingerprint = "model=tiny;sparsifier=topk";
  s.rank = 1;
  s.world = 2;
  s.step = 42;
  s.ef_iteration = 42;
  s.elapsed_s = 1.5;
  for (int i = 0; i < 24; ++i) {
    s.params.push_back(static_cast<float>(i) * 0.5f);
    s.momentum.push_back(static_cast<float>(i) * -0.25f);
    s.residual.push_back(static_cast<float>(i % 5));
  }
  s.buffers = {1.0f, 2.0f};
  s.sparsifier_state = {std::byte{1}, std::byte{2}, std::byte{3}};
  return s;
}

}  // namespace

// Each test's own directory, removed when it ends.
using CheckpointFile = TempDirTest;
using CheckpointResume = TempDirTest;

TEST_F(CheckpointFile, RoundTrips) {
  const auto f = dir_ / "rank-1.bin";
  const auto s = small_state();
  save_checkpoint_file(f.string(), s);
  const auto l = load_checkpoint_file(f.string());
  EXPECT_EQ(l.fingerprint, s.fingerprint);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.world, 2);
  EXPECT_EQ(l.step, 42);
  EXPECT_EQ(l.ef_iteration, 42);
  EXPECT_EQ(l.elapsed_s, 1.5);
  EXPECT_EQ(l.params, s.params);
  EXPECT_EQ(l.momentum, s.momentum);
  EXPECT_EQ(l.residual, s.residual);
  EXPECT_EQ(l.buffers, s.buffers);
  EXPECT_EQ(l.sparsifier_state, s.sparsifier_state);
}

TEST_F(CheckpointFile, TruncatedAtAnyLengthIsRefusedAndLeftAlone) {
  const auto f = dir_ / "rank-0.bin";
  save_checkpoint_file(f.string(), small_state());
  const std::string good = read_file(f);
  const std::size_t n = good.size();
  for (std::size_t len :
       {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{31},
        std::size_t{32}, std::size_t{33}, n / 2, n - 33, n - 32, n - 1}) {
    const std::string cut = good.substr(0, len);
    write_all(f, cut);
    const auto msg = refusal_of(f);
    EXPECT_NE(msg.find("checkpoint " + f.string() + ": truncated: " + std::to_string(len) + " of"),
              std::string::npos)
        << "length " << len << ": " << msg;
    if (len >= 32) {
      EXPECT_NE(msg.find(" of " + std::to_string(n) + " bytes"), std::string::npos) << msg;
    }
    EXPECT_EQ(read_file(f), cut) << "length " << len << ": the file was changed";
  }
  // Bytes appended are refused too.
  write_all(f, good + "x");
  EXPECT_NE(refusal_of(f).find("trailing data"), std::string::npos);
}

TEST_F(CheckpointFile, OneFlippedBitAnywhereIsRefusedAndLeftAlone) {
  const auto f = dir_ / "rank-0.bin";
  save_checkpoint_file(f.string(), small_state());
  const std::string good = read_file(f);
  ASSERT_LT(good.size(), 4096u);  // small enough to flip a bit in every byte
  // One bit per byte, walking through the 8 bit positions as the byte position advances.
  for (std::size_t pos = 0; pos < good.size(); ++pos) {
    const int bit = static_cast<int>(pos % 8);
    std::string bad = good;
    bad[pos] = static_cast<char>(bad[pos] ^ (1 << bit));
    write_all(f, bad);
    const auto msg = refusal_of(f);
    ASSERT_NE(msg.find("checkpoint " + f.string() + ": "), std::string::npos)
        << "byte " << pos << " bit " << bit << " accepted or unnamed: " << msg;
    // The magic's bytes say "not a checkpoint"; any other byte fails a checksum.
    const std::string want = pos < 8 ? "bad magic" : "checksum mismatch";
    ASSERT_NE(msg.find(want), std::string::npos) << "byte " << pos << " bit " << bit << ": " << msg;
    ASSERT_EQ(read_file(f), bad) << "the file was changed";
  }
  write_all(f, good);
  EXPECT_EQ(refusal_of(f), "");
}

TEST_F(CheckpointFile, OldFormatAndForeignFilesAreRefusedByName) {
  const auto f = dir_ / "rank-0.bin";
  // A format-1 file (magic EXDYCKP1, then a payload length and an FNV-1a): refused by version.
  write_all(f, std::string("EXDYCKP1") + std::string(40, '\0'));
  auto msg = refusal_of(f);
  EXPECT_NE(msg.find("checkpoint " + f.string() + ": format version 1"), std::string::npos) << msg;
  write_all(f, std::string(100, 'z'));
  EXPECT_NE(refusal_of(f).find("not an exdyna checkpoint"), std::string::npos);
  msg = refusal_of(dir_ / "missing.bin");
  EXPECT_NE(msg.find((dir_ / "missing.bin").string()), std::string::npos) << msg;
}

namespace {

// Runs o on `world` in-process ranks; returns the message every rank threw (they must agree up
// to the "(refused by rank r)" suffix), or "" when the run completed.
std::string run_refusal(const TrainOptions& o, int world, const DataBundle& data) {
  std::vector<std::string> msgs(static_cast<std::size_t>(world));
  try {
    comm::run_local(world, [&](comm::Communicator& c) {
      try {
        train_worker(o, c, &data);
      } catch (const Error& e) {
        msgs[static_cast<std::size_t>(c.rank())] = e.what();
        throw;
      }
    });
  } catch (const Error&) {
  }
  const auto reason = [](const std::string& m) { return m.substr(0, m.find(" (refused by rank")); };
  for (int r = 1; r < world; ++r)
    EXPECT_EQ(reason(msgs[static_cast<std::size_t>(r)]), reason(msgs[0]))
        << "rank " << r << " refused differently (or not at all)";
  return msgs[0];
}

}  // namespace

// A real checkpoint of a 2-rank topk run, resumed by runs that must not: each is refused on every
// rank with the file and the reason, and nothing in the run directory changes (not even a log).
TEST_F(CheckpointResume, ForeignOrCorruptCheckpointsAreRefusedOnEveryRank) {
  const std::string sp = have("topk") ? "topk" : "dense";
  const auto data = tiny_data(384, 64);
  auto o = tiny_options(sp);
  o.out_dir = (dir_ / "run").string();
  o.checkpoint_every = 4;
  o.max_steps = 6;
  comm::run_local(2, [&](comm::Communicator& c) { train_worker(o, c, &data); });
  const auto step_dir = dir_ / "run" / "checkpoints" / "step-4";
  ASSERT_TRUE(fs::exists(step_dir / "rank-1.bin"));
  const auto before = snapshot(dir_);
  const auto expect_refused = [&](TrainOptions r, int world, const std::string& file,
                                  const std::string& reason, const DataBundle* other = nullptr) {
    r.resume = (dir_ / "run").string();
    r.out_dir = (dir_ / "run").string();  // the worst case: resuming into the same directory
    r.checkpoint_every = 1;
    const auto msg = run_refusal(r, world, other ? *other : data);
    EXPECT_NE(msg.find("checkpoint " + (step_dir / file).string() + ": "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(reason), std::string::npos) << msg;
    EXPECT_EQ(snapshot(dir_), before) << "a refused resume changed the run directory: " << msg;
  };
  expect_refused(o, 3, "rank-0.bin", "written for 2 ranks, this run has 3");
  expect_refused(o, 1, "rank-0.bin", "written for 2 ranks, this run has 1");
  if (have("exdyna"))
    expect_refused(tiny_options("exdyna"), 2, "rank-0.bin",
                   "written by sparsifier " + sp + ", this run uses exdyna");
  expect_refused(tiny_options("dense"), 2, "rank-0.bin",
                 "written by sparsifier " + sp + ", this run uses dense");
  auto denser = o;
  denser.sparse.density = 0.1;
  expect_refused(denser, 2, "rank-0.bin", "0.1");
  // Another model size (5 classes instead of 4: a larger output layer).
  const DataBundle five = tiny_data(384, 64, 5);
  expect_refused(o, 2, "rank-0.bin", "written for n_g = ", &five);

  // One flipped bit in rank 1's file: rank 0's file is fine, yet both ranks refuse.
  const auto f1 = step_dir / "rank-1.bin";
  std::string bad = before.at(f1.string());
  bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x10);
  write_all(f1, bad);
  auto corrupt = before;
  corrupt[f1.string()] = bad;
  auto r = o;
  r.resume = (dir_ / "run").string();
  const auto msg = run_refusal(r, 2, data);
  EXPECT_NE(msg.find("checkpoint " + f1.string() + ": checksum mismatch"), std::string::npos)
      << msg;
  EXPECT_EQ(snapshot(dir_), corrupt);
  // Truncated: refused with both lengths.
  write_all(f1, before.at(f1.string()).substr(0, 100));
  EXPECT_NE(run_refusal(r, 2, data)
                .find("checkpoint " + f1.string() + ": truncated: 100 of " +
                      std::to_string(before.at(f1.string()).size()) + " bytes"),
            std::string::npos);
  // Restored, it resumes.
  write_all(f1, before.at(f1.string()));
  EXPECT_EQ(run_refusal(r, 2, data), "");
}
