#include "exdyna/train/checkpoint.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exdyna/core/error.hpp"
#include "exdyna/train/metrics.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'E', 'X', 'D', 'Y', 'C', 'K', 'P', '1'};

std::uint64_t fnv1a(const char* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 0x100000001b3ULL;
  return h;
}

class Writer {
 public:
  template <typename T>
  void pod(const T& v) {
    buf_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    pod(static_cast<std::uint64_t>(v.size()));
    buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void str(const std::string& s) {
    pod(static_cast<std::uint64_t>(s.size()));
    buf_.append(s);
  }
  std::string& buf() { return buf_; }

 private:
  std::string buf_;
};

class Reader {
 public:
  Reader(const std::string& data, std::string path) : d_(data), path_(std::move(path)) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, d_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> vec() {
    const auto n = pod<std::uint64_t>();
    need(n * sizeof(T));
    std::vector<T> v(n);
    std::memcpy(v.data(), d_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = pod<std::uint64_t>();
    need(n);
    std::string s = d_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  void need(std::uint64_t n) {
    if (n > d_.size() - pos_)
      throw DataError(detail::concat("checkpoint ", path_, " is truncated or corrupt (needs ", n,
                                     " more bytes at offset ", pos_, " of ", d_.size(), ")"));
  }
  const std::string& d_;
  std::string path_;
  std::size_t pos_ = 0;
};

}  // namespace

void save_checkpoint_file(const std::string& path, const CheckpointState& s) {
  Writer w;
  w.str(s.fingerprint);
  w.pod(static_cast<std::int32_t>(s.rank));
  w.pod(static_cast<std::int32_t>(s.world));
  w.pod(s.step);
  w.pod(s.ef_iteration);
  w.pod(s.elapsed_s);
  w.vec(s.params);
  w.vec(s.momentum);
  w.vec(s.residual);
  w.vec(s.buffers);
  w.vec(s.sparsifier_state);
  std::string out(kMagic, sizeof kMagic);
  const std::uint64_t h = fnv1a(w.buf().data(), w.buf().size());
  const std::uint64_t len = w.buf().size();
  out.append(reinterpret_cast<const char*>(&len), 8);
  out.append(reinterpret_cast<const char*>(&h), 8);
  out.append(w.buf());
  atomic_write(path, out);
}

CheckpointState load_checkpoint_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("checkpoint file " + path + " cannot be opened (missing?)");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  if (all.size() < 24 || std::memcmp(all.data(), kMagic, 8) != 0)
    throw DataError("checkpoint file " + path +
                    " is not an exdyna checkpoint (bad magic or too short)");
  std::uint64_t len, h;
  std::memcpy(&len, all.data() + 8, 8);
  std::memcpy(&h, all.data() + 16, 8);
  if (all.size() - 24 != len)
    throw DataError(detail::concat("checkpoint file ", path, " is truncated: ", all.size() - 24,
                                   " payload bytes, expected ", len));
  const std::string payload = all.substr(24);
  if (fnv1a(payload.data(), payload.size()) != h)
    throw DataError("checkpoint file " + path + " fails its checksum (corrupt)");
  Reader r(payload, path);
  CheckpointState s;
  s.fingerprint = r.str();
  s.rank = r.pod<std::int32_t>();
  s.world = r.pod<std::int32_t>();
  s.step = r.pod<std::int64_t>();
  s.ef_iteration = r.pod<std::int64_t>();
  s.elapsed_s = r.pod<double>();
  s.params = r.vec<float>();
  s.momentum = r.vec<float>();
  s.residual = r.vec<float>();
  s.buffers = r.vec<float>();
  s.sparsifier_state = r.vec<std::byte>();
  return s;
}

std::string checkpoint_step_dir(const std::string& dir, std::int64_t step) {
  return (fs::path(dir) / ("step-" + std::to_string(step))).string();
}

std::string checkpoint_rank_file(const std::string& step_dir, int rank) {
  return (fs::path(step_dir) / ("rank-" + std::to_string(rank) + ".bin")).string();
}

void mark_latest(const std::string& dir, const std::string& step_dir) {
  atomic_write((fs::path(dir) / "latest").string(), fs::path(step_dir).filename().string() + "\n");
}

std::string resolve_resume(const std::string& path) {
  fs::path p(path);
  if (!fs::exists(p)) throw InvalidArgument("--resume " + path + ": no such file or directory");
  if (fs::is_regular_file(p)) p = p.parent_path();  // a rank file: its step directory
  if (fs::exists(p / "checkpoints" / "latest")) p = p / "checkpoints";
  if (fs::exists(p / "latest")) {
    std::ifstream in(p / "latest");
    std::string name;
    in >> name;
    p = p / name;
  }
  if (!fs::exists(p / "rank-0.bin"))
    throw InvalidArgument(
        "--resume " + path +
        ": no checkpoint found there (expected DIR/latest, DIR/checkpoints/latest "
        "or a step-<S> directory holding rank-<r>.bin files)");
  return p.string();
}

}  // namespace exdyna::train
