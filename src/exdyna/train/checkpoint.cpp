#include "exdyna/train/checkpoint.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/train/metrics.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'E', 'X', 'D', 'Y', 'C', 'K', 'P', '1'};

}  // namespace

void save_checkpoint_file(const std::string& path, const CheckpointState& s) {
  core::ByteWriter w;
  w.put_string(s.fingerprint);
  w.put(static_cast<std::int32_t>(s.rank));
  w.put(static_cast<std::int32_t>(s.world));
  w.put(s.step);
  w.put(s.ef_iteration);
  w.put(s.elapsed_s);
  w.put_list(std::span<const float>(s.params));
  w.put_list(std::span<const float>(s.momentum));
  w.put_list(std::span<const float>(s.residual));
  w.put_list(std::span<const float>(s.buffers));
  w.put_list(std::span<const std::byte>(s.sparsifier_state));
  const auto& payload = w.bytes();
  std::string out(kMagic, sizeof kMagic);
  const std::uint64_t h = core::fnv1a(payload);
  const std::uint64_t len = payload.size();
  out.append(reinterpret_cast<const char*>(&len), 8);
  out.append(reinterpret_cast<const char*>(&h), 8);
  out.append(reinterpret_cast<const char*>(payload.data()), payload.size());
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
  if (core::fnv1a(payload.data(), payload.size()) != h)
    throw DataError("checkpoint file " + path + " fails its checksum (corrupt)");
  core::ByteReader r(std::as_bytes(std::span(payload)), "checkpoint " + path);
  CheckpointState s;
  s.fingerprint = r.get_string();
  s.rank = r.get<std::int32_t>();
  s.world = r.get<std::int32_t>();
  s.step = r.get<std::int64_t>();
  s.ef_iteration = r.get<std::int64_t>();
  s.elapsed_s = r.get<double>();
  s.params = r.get_list<float>();
  s.momentum = r.get_list<float>();
  s.residual = r.get_list<float>();
  s.buffers = r.get_list<float>();
  s.sparsifier_state = r.get_list<std::byte>();
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
