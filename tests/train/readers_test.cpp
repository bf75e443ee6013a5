// Data readers: IDX (gzip) and CIFAR binary on fixtures written here; truncated and corrupt files
// and a missing dataset give clear errors; sharding; the text corpus; the optimizer; checkpoints.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "exdyna/core/error.hpp"
#include "exdyna/train/checkpoint.hpp"
#include "exdyna/train/datasets.hpp"
#include "exdyna/train/idx.hpp"
#include "exdyna/train/optimizer.hpp"
#include "exdyna/train/text.hpp"
#include "unit/temp_dir_test_base.hpp"

namespace fs = std::filesystem;
using namespace exdyna;
using namespace exdyna::train;

namespace {

// Images whose pixel values encode (sample, position); labels = sample mod 10.
void write_mnist_fixture(const fs::path& dir, const std::string& prefix, std::uint32_t n) {
  std::vector<std::uint8_t> img(n * 28 * 28), lbl(n);
  for (std::uint32_t s = 0; s < n; ++s) {
    lbl[s] = static_cast<std::uint8_t>(s % 10);
    for (std::uint32_t i = 0; i < 784; ++i)
      img[s * 784 + i] = static_cast<std::uint8_t>((s * 7 + i) % 256);
  }
  write_idx_gz((dir / (prefix + "-images-idx3-ubyte.gz")).string(), {n, 28, 28}, img);
  write_idx_gz((dir / (prefix + "-labels-idx1-ubyte.gz")).string(), {n}, lbl);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// Each test's own directory for its fixture files, removed when it ends.
using IdxReader = TempDirTest;
using CifarReader = TempDirTest;
using Checkpoint = TempDirTest;

TEST_F(IdxReader, ReadsValidFixture) {
  write_mnist_fixture(dir_, "train", 30);
  write_mnist_fixture(dir_, "t10k", 12);
  const auto tr = load_image_dataset(DatasetKind::kFashionMnist, dir_.string(), true);
  const auto te = load_image_dataset(DatasetKind::kFashionMnist, dir_.string(), false);
  ASSERT_EQ(tr.size(), 30);
  ASSERT_EQ(te.size(), 12);
  EXPECT_EQ(tr.height, 28);
  EXPECT_EQ(tr.width, 28);
  for (int s = 0; s < 30; ++s) {
    EXPECT_EQ(tr.labels[static_cast<std::size_t>(s)], s % 10);
    EXPECT_EQ(tr.pixels[static_cast<std::size_t>(s * 784 + 5)], (s * 7 + 5) % 256);
  }
}

TEST_F(IdxReader, TruncatedFileNamesFileAndSizes) {
  // Header promises 10 images of 28x28, data holds 3.
  write_idx_gz((dir_ / "x.gz").string(), {10, 28, 28}, {});
  std::vector<std::uint8_t> part(3 * 784, 1);
  write_idx_gz((dir_ / "x.gz").string(), {10, 28, 28}, part);
  const auto msg = error_of([&] { read_idx((dir_ / "x.gz").string(), 3); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x.gz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("7840"), std::string::npos) << msg;
}

// Found by tests/fuzz/idx_fuzz: a 14-byte plain file whose header claims 3 x 1864714900 elements
// made the reader allocate (and zero) 5.6 GB before reading any data. It is refused as truncated
// after the 2 bytes it holds, with a buffer that grows only with the bytes that arrive.
TEST_F(IdxReader, HugeHeaderOnShortFileIsTruncatedNotAllocated) {
  const unsigned char bytes[] = {0, 0, 8, 2, 0, 0, 0, 3, 0x6f, 0x25, 0x4a, 0x94, 0x00, 0xb9};
  std::ofstream(dir_ / "huge", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes), sizeof bytes);
  const auto msg = error_of([&] { read_idx((dir_ / "huge").string()); });
  EXPECT_NE(msg.find("truncated: 2 data bytes, expected 5594144700"), std::string::npos) << msg;
}

TEST_F(IdxReader, CorruptGzipAndBadMagicAreRefused) {
  write_mnist_fixture(dir_, "train", 40);
  const auto path = dir_ / "train-images-idx3-ubyte.gz";
  // Overwrite the middle of the compressed stream: zlib reports a data error or the CRC fails.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(path) / 2));
    const std::string junk(64, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto msg = error_of([&] { read_idx(path.string(), 3); });
  EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
  EXPECT_TRUE(msg.find("corrupt") != std::string::npos ||
              msg.find("truncated") != std::string::npos)
      << msg;
  // A labels file where an images file is expected: wrong number of dimensions.
  msg = error_of([&] { read_idx((dir_ / "train-labels-idx1-ubyte.gz").string(), 3); });
  EXPECT_NE(msg.find("dimensions"), std::string::npos) << msg;
  // Not an IDX file at all.
  {
    std::ofstream f(dir_ / "junk", std::ios::binary);
    f << "hello world, not idx";
  }
  msg = error_of([&] { read_idx((dir_ / "junk").string()); });
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
}

TEST_F(IdxReader, LabelsOutOfRangeAndCountMismatch) {
  write_mnist_fixture(dir_, "train", 20);
  write_idx_gz((dir_ / "train-labels-idx1-ubyte.gz").string(), {19},
               std::vector<std::uint8_t>(19, 1));
  auto msg = error_of([&] { load_image_dataset(DatasetKind::kMnist, dir_.string(), true); });
  EXPECT_NE(msg.find("20 images"), std::string::npos) << msg;
  write_idx_gz((dir_ / "train-labels-idx1-ubyte.gz").string(), {20},
               std::vector<std::uint8_t>(20, 12));
  msg = error_of([&] { load_image_dataset(DatasetKind::kMnist, dir_.string(), true); });
  EXPECT_NE(msg.find("label 12"), std::string::npos) << msg;
}

TEST_F(IdxReader, MissingDatasetNamesPackageAndFlag) {
  const auto msg =
      error_of([] { load_image_dataset(DatasetKind::kFashionMnist, "/nonexistent/fmnist", true); });
  EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--data-dir"), std::string::npos) << msg;
  const auto msg2 =
      error_of([] { load_image_dataset(DatasetKind::kCifar10, "/nonexistent/c10", true); });
  EXPECT_NE(msg2.find("--data-dir"), std::string::npos) << msg2;
}

TEST_F(CifarReader, ReadsFixtureAndRefusesTruncated) {
  auto write = [&](const std::string& name, int n, int label_bytes, std::size_t cut = 0) {
    std::string data;
    for (int i = 0; i < n; ++i) {
      if (label_bytes == 2) data += static_cast<char>(i % 20);
      data += static_cast<char>(i % (label_bytes == 2 ? 100 : 10));
      for (int j = 0; j < 3072; ++j) data += static_cast<char>((i + j) % 256);
    }
    data.resize(data.size() - cut);
    std::ofstream(dir_ / name, std::ios::binary) << data;
  };
  for (int b = 1; b <= 5; ++b) write("data_batch_" + std::to_string(b) + ".bin", 4, 1);
  write("test_batch.bin", 3, 1);
  const auto tr = load_image_dataset(DatasetKind::kCifar10, dir_.string(), true);
  ASSERT_EQ(tr.size(), 20);
  EXPECT_EQ(tr.channels, 3);
  EXPECT_TRUE(tr.augment);
  EXPECT_EQ(tr.labels[3], 3);
  EXPECT_EQ(tr.pixels[3 * 3072 + 100], (3 + 100) % 256);
  write("train.bin", 5, 2);
  write("test.bin", 2, 2);
  const auto c100 = load_image_dataset(DatasetKind::kCifar100, dir_.string(), true);
  EXPECT_EQ(c100.num_classes, 100);
  EXPECT_EQ(c100.labels[4], 4);
  write("test_batch.bin", 3, 1, 100);
  const auto msg =
      error_of([&] { load_image_dataset(DatasetKind::kCifar10, dir_.string(), false); });
  EXPECT_NE(msg.find("test_batch.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(Sharding, DisjointEqualReshuffledDeterministic) {
  const std::int64_t n = 103;
  const int w = 4;
  std::set<std::int64_t> seen;
  for (int r = 0; r < w; ++r) {
    const auto s = epoch_shard(n, w, r, 7, 0);
    EXPECT_EQ(static_cast<std::int64_t>(s.size()), n / w);
    for (auto i : s) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " on two workers";
    EXPECT_EQ(s, epoch_shard(n, w, r, 7, 0));
    EXPECT_NE(s, epoch_shard(n, w, r, 7, 1)) << "not reshuffled between epochs";
  }
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), (n / w) * w);
}

TEST(TextCorpus, BuildsVocabularyAndEmbeddedCorpusLoads) {
  const auto c = build_corpus("a b c\na b\n", "a z\n", "c\n", "t");
  // <unk>, <eos>, a, b, c
  EXPECT_EQ(c.vocab_size(), 5);
  EXPECT_EQ(c.train, (std::vector<std::int32_t>{2, 3, 4, 1, 2, 3, 1}));
  EXPECT_EQ(c.valid, (std::vector<std::int32_t>{2, 0, 1}));
  const auto e = load_embedded_corpus("");
  EXPECT_GT(e.train.size(), 20000u);
  EXPECT_GT(e.valid.size(), 500u);
  EXPECT_GT(e.test.size(), 500u);
  const auto msg = error_of([] { load_wikitext2("/nonexistent/wt2"); });
  EXPECT_NE(msg.find("--data-dir"), std::string::npos) << msg;
}

TEST(Optimizer, SgdMatchesTorchSemantics) {
  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 0.01;
  o.nesterov = true;
  Sgd sgd(1, o);
  std::vector<float> p{1.0f}, g{0.5f};
  sgd.step(p, g, 0.1);
  // g' = 0.5 + 0.01 = 0.51; buf = 0.51; nesterov g'' = 0.51 + 0.9 * 0.51 = 0.969
  EXPECT_NEAR(p[0], 1.0 - 0.1 * 0.969, 1e-6);
  sgd.step(p, g, 0.1);
  const double p1 = 1.0 - 0.1 * 0.969;
  const double g2 = 0.5 + 0.01 * p1, buf = 0.9 * 0.51 + g2;
  EXPECT_NEAR(p[0], p1 - 0.1 * (g2 + 0.9 * buf), 1e-6);
  LrSchedule s;
  s.base_lr = 1.0;
  s.warmup_epochs = 1;
  s.decay_epochs = {2};
  EXPECT_NEAR(s.at(0, 10), 0.1, 1e-12);
  EXPECT_NEAR(s.at(9, 10), 1.0, 1e-12);
  EXPECT_NEAR(s.at(15, 10), 1.0, 1e-12);
  EXPECT_NEAR(s.at(20, 10), 0.1, 1e-12);
  std::vector<float> v{3.0f, 4.0f};
  EXPECT_NEAR(clip_grad_norm(v, 1.0), 5.0, 1e-9);
  EXPECT_NEAR(std::hypot(v[0], v[1]), 1.0, 1e-5);
}

TEST_F(Checkpoint, RoundTripAndCorruptionDetected) {
  CheckpointState s;
  s.fingerprint = "fp";
  s.rank = 1;
  s.world = 2;
  s.step = 42;
  s.params = {1, 2, 3};
  s.momentum = {4, 5, 6};
  s.residual = {7, 8, 9};
  s.sparsifier_state = {std::byte{1}, std::byte{2}};
  const auto f = (dir_ / "r.bin").string();
  save_checkpoint_file(f, s);
  const auto l = load_checkpoint_file(f);
  EXPECT_EQ(l.step, 42);
  EXPECT_EQ(l.params, s.params);
  EXPECT_EQ(l.residual, s.residual);
  EXPECT_EQ(l.sparsifier_state, s.sparsifier_state);
  fs::resize_file(f, fs::file_size(f) - 3);
  auto msg = error_of([&] { load_checkpoint_file(f); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  save_checkpoint_file(f, s);
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-2, std::ios::end);
    io.put('\x7f');
  }
  msg = error_of([&] { load_checkpoint_file(f); });
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
}
