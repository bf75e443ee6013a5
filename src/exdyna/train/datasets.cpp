#include "exdyna/train/datasets.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "exdyna/core/enum_names.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/train/idx.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;

// cifar-10 and cifar-100 are accepted aliases.
constexpr core::EnumNames<DatasetKind, 7> kDatasetNames{
    {{DatasetKind::kFashionMnist, "fashion-mnist"},
     {DatasetKind::kMnist, "mnist"},
     {DatasetKind::kCifar10, "cifar10"},
     {DatasetKind::kCifar100, "cifar100"},
     {DatasetKind::kSynthetic, "synthetic"},
     {DatasetKind::kCifar10, "cifar-10"},
     {DatasetKind::kCifar100, "cifar-100"}}};

const char* to_string(DatasetKind k) {
  return core::enum_to_string(kDatasetNames, k);
}

DatasetKind parse_dataset(const std::string& s) {
  return core::enum_parse(kDatasetNames, "dataset", s);
}

std::string default_data_dir(DatasetKind k) {
  switch (k) {
    case DatasetKind::kFashionMnist:
      return "/usr/share/datasets/fashion-mnist";
    case DatasetKind::kMnist:
      return "/usr/share/datasets/mnist";
    case DatasetKind::kCifar10:
      return "/usr/share/datasets/cifar-10-batches-bin";
    case DatasetKind::kCifar100:
      return "/usr/share/datasets/cifar-100-binary";
    case DatasetKind::kSynthetic:
      return "";
  }
  return "";
}

namespace {

std::string missing_hint(DatasetKind k) {
  std::string s;
  if (k == DatasetKind::kFashionMnist)
    s = "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist; "
        "it provides " +
        default_data_dir(k) + ") or ";
  return s + "pass --data-dir DIR pointing at a directory that holds the " + to_string(k) +
         " files";
}

// Finds `name` in dir, with or without a .gz suffix.
std::string find_mnist_file(DatasetKind k, const std::string& dir, const std::string& name) {
  for (const auto& cand : {name + ".gz", name}) {
    const auto p = fs::path(dir) / cand;
    if (fs::exists(p)) return p.string();
  }
  throw DataError(detail::concat(to_string(k),
                                 " not found: ", (fs::path(dir) / (name + ".gz")).string(),
                                 " does not exist; ", missing_hint(k)));
}

ImageDataset load_mnist_like(DatasetKind k, const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const auto img_path = find_mnist_file(k, dir, prefix + "-images-idx3-ubyte");
  const auto lbl_path = find_mnist_file(k, dir, prefix + "-labels-idx1-ubyte");
  auto img = read_idx(img_path, 3);
  auto lbl = read_idx(lbl_path, 1);
  if (img.dims[0] != lbl.dims[0])
    throw DataError(detail::concat(img_path, " holds ", img.dims[0], " images but ", lbl_path,
                                   " holds ", lbl.dims[0], " labels; expected equal counts"));
  ImageDataset d;
  d.name = to_string(k);
  d.channels = 1;
  d.height = static_cast<int>(img.dims[1]);
  d.width = static_cast<int>(img.dims[2]);
  d.num_classes = 10;
  d.pixels = std::move(img.data);
  d.labels.reserve(lbl.data.size());
  for (std::size_t i = 0; i < lbl.data.size(); ++i) {
    if (lbl.data[i] >= 10)
      throw DataError(detail::concat(lbl_path, ": label ", static_cast<int>(lbl.data[i]),
                                     " at index ", i,
                                     " is out of range; expected 0..9 (corrupt file)"));
    d.labels.push_back(lbl.data[i]);
  }
  if (k == DatasetKind::kFashionMnist) {
    d.mean = {0.2860f};
    d.stddev = {0.3530f};
  } else {
    d.mean = {0.1307f};
    d.stddev = {0.3081f};
  }
  return d;
}

// CIFAR binary records: [coarse label] label, then 3072 bytes (1024 R, 1024 G, 1024 B).
void read_cifar_file(const std::string& path, int label_bytes, ImageDataset& d) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(detail::concat("cannot open ", path));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::int64_t>(in.tellg());
  in.seekg(0);
  const std::int64_t rec = label_bytes + 3072;
  if (size == 0 || size % rec != 0)
    throw DataError(detail::concat("CIFAR file ", path, " has ", size,
                                   " bytes; expected a non-zero multiple of the ", rec,
                                   "-byte record (truncated or corrupt)"));
  const std::int64_t n = size / rec;
  std::vector<unsigned char> buf(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(buf.data()), size);
  if (!in) throw DataError(detail::concat("reading ", path, " failed"));
  const auto base = d.pixels.size();
  d.pixels.resize(base + static_cast<std::size_t>(n * 3072));
  for (std::int64_t i = 0; i < n; ++i) {
    const unsigned char* r = &buf[static_cast<std::size_t>(i * rec)];
    const int label = r[label_bytes - 1];
    if (label >= d.num_classes)
      throw DataError(detail::concat("CIFAR file ", path, ": record ", i, " has label ", label,
                                     "; expected 0..", d.num_classes - 1, " (corrupt file)"));
    d.labels.push_back(label);
    std::copy(r + label_bytes, r + rec,
              d.pixels.begin() + static_cast<std::ptrdiff_t>(base + i * 3072));
  }
}

ImageDataset load_cifar(DatasetKind k, const std::string& dir, bool train) {
  ImageDataset d;
  d.name = to_string(k);
  d.channels = 3;
  d.height = d.width = 32;
  d.augment = train;
  std::vector<std::string> files;
  int label_bytes = 1;
  if (k == DatasetKind::kCifar10) {
    d.num_classes = 10;
    d.mean = {0.4914f, 0.4822f, 0.4465f};
    d.stddev = {0.2470f, 0.2435f, 0.2616f};
    if (train)
      for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
    else
      files.push_back("test_batch.bin");
  } else {
    d.num_classes = 100;
    label_bytes = 2;  // coarse, fine: the fine label is the class
    d.mean = {0.5071f, 0.4865f, 0.4409f};
    d.stddev = {0.2673f, 0.2564f, 0.2762f};
    files.push_back(train ? "train.bin" : "test.bin");
  }
  for (const auto& f : files) {
    const auto p = fs::path(dir) / f;
    if (!fs::exists(p))
      throw DataError(detail::concat(to_string(k), " not found: ", p.string(), " does not exist; ",
                                     missing_hint(k), " (the binary version: ", files.front(),
                                     ", ...)"));
    read_cifar_file(p.string(), label_bytes, d);
  }
  return d;
}

}  // namespace

ImageDataset load_image_dataset(DatasetKind k, const std::string& dir_in, bool train) {
  const std::string dir = dir_in.empty() ? default_data_dir(k) : dir_in;
  switch (k) {
    case DatasetKind::kFashionMnist:
    case DatasetKind::kMnist:
      return load_mnist_like(k, dir, train);
    case DatasetKind::kCifar10:
    case DatasetKind::kCifar100:
      return load_cifar(k, dir, train);
    case DatasetKind::kSynthetic:
      return synthetic_image_dataset(train ? 4096 : 1024, 10, 1, 28, 28, train ? 1 : 2);
  }
  throw InvalidArgument("unknown dataset kind");
}

ImageDataset synthetic_image_dataset(std::int64_t n, int classes, int channels, int height,
                                     int width, std::uint64_t seed) {
  EXDYNA_CHECK_ARG(n > 0 && classes > 1 && channels > 0 && height > 0 && width > 0,
                   "synthetic dataset: bad shape n=", n, " classes=", classes);
  ImageDataset d;
  d.name = "synthetic";
  d.channels = channels;
  d.height = height;
  d.width = width;
  d.num_classes = classes;
  d.mean.assign(static_cast<std::size_t>(channels), 0.5f);
  d.stddev.assign(static_cast<std::size_t>(channels), 0.25f);
  const std::int64_t sb = d.sample_bytes();
  // One fixed random template per class (same for train and test: seeded by the class only).
  std::vector<std::vector<std::uint8_t>> tmpl(static_cast<std::size_t>(classes));
  for (int c = 0; c < classes; ++c) {
    SplitMix64 g(mix_seed(0x5eed, static_cast<std::uint64_t>(c)));
    for (std::int64_t i = 0; i < sb; ++i)
      tmpl[static_cast<std::size_t>(c)].push_back(g.below(2) ? 200 : 40);
  }
  SplitMix64 g(mix_seed(seed, 0xda7a));
  d.pixels.resize(static_cast<std::size_t>(n * sb));
  for (std::int64_t s = 0; s < n; ++s) {
    const int c = static_cast<int>(g.below(static_cast<std::uint64_t>(classes)));
    d.labels.push_back(c);
    for (std::int64_t i = 0; i < sb; ++i) {
      const int noise = static_cast<int>(g.below(161)) - 80;
      const int v = tmpl[static_cast<std::size_t>(c)][static_cast<std::size_t>(i)] + noise;
      d.pixels[static_cast<std::size_t>(s * sb + i)] =
          static_cast<std::uint8_t>(std::clamp(v, 0, 255));
    }
  }
  return d;
}

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  SplitMix64 g(a);
  std::uint64_t h = g.next();
  for (std::uint64_t v : {b, c, d}) {
    SplitMix64 g2(h ^ (v * core::kSplitMixGamma + 0x632be59bd9b4e019ULL));
    h = g2.next();
  }
  return h;
}

std::vector<std::int64_t> epoch_shard(std::int64_t n, int world, int rank, std::uint64_t seed,
                                      std::int64_t epoch) {
  EXDYNA_CHECK_ARG(world > 0 && rank >= 0 && rank < world, "epoch_shard: rank ", rank, " of world ",
                   world);
  EXDYNA_CHECK_ARG(n >= world, "dataset of ", n, " samples cannot be sharded over ", world,
                   " workers");
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) perm[static_cast<std::size_t>(i)] = i;
  SplitMix64 g(mix_seed(seed, 0x5ba7d, static_cast<std::uint64_t>(epoch)));
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(perm[static_cast<std::size_t>(i)], perm[g.below(static_cast<std::uint64_t>(i + 1))]);
  const std::int64_t per = n / world;
  std::vector<std::int64_t> shard(static_cast<std::size_t>(per));
  for (std::int64_t j = 0; j < per; ++j)
    shard[static_cast<std::size_t>(j)] = perm[static_cast<std::size_t>(j * world + rank)];
  return shard;
}

}  // namespace exdyna::train
