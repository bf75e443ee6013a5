#include "exdyna/train/checkpoint.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/core/sha256.hpp"
#include "exdyna/train/metrics.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;
namespace {

// File layout, format version 2 (all integers little-endian, as the ByteWriter writes them):
//   header  (32 bytes): magic "EXDYCKPT", u32 version = 2, u32 0, u64 file size,
//                       u64 FNV-1a of the 24 bytes before it
//   payload (the CheckpointState fields, ByteWriter)
//   trailer (32 bytes): SHA-256 of everything before it
// The header has its own checksum so that a flipped bit in the size reads as corruption, not as
// truncation; the trailer covers every byte of header and payload, so one flipped bit anywhere
// is refused. Version 1 files (magic "EXDYCKP1", an FNV-1a of the payload only) are refused with
// a message naming the format version: a checkpoint only resumes the build that wrote it.
constexpr char kMagic[8] = {'E', 'X', 'D', 'Y', 'C', 'K', 'P', 'T'};
constexpr char kMagicV1[8] = {'E', 'X', 'D', 'Y', 'C', 'K', 'P', '1'};
constexpr std::uint32_t kVersion = 2;
constexpr std::size_t kHeader = 32, kTrailer = 32;

template <typename T>
T read_at(const std::string& all, std::size_t pos) {
  T v;
  std::memcpy(&v, all.data() + pos, sizeof v);
  return v;
}

[[noreturn]] void refuse(const std::string& path, const std::string& reason) {
  throw DataError("checkpoint " + path + ": " + reason);
}

// Checks everything but the payload's fields; returns the payload.
std::string_view checked_payload(const std::string& path, const std::string& all) {
  const std::size_t n = all.size();
  if (n >= 8 && std::memcmp(all.data(), kMagicV1, 8) == 0)
    refuse(path, detail::concat("format version 1 (an older exdyna); this build reads format "
                                "version ",
                                kVersion,
                                " only: resume with the build that wrote "
                                "it, or start afresh"));
  if (std::memcmp(all.data(), kMagic, std::min<std::size_t>(n, 8)) != 0)
    refuse(path, "not an exdyna checkpoint (bad magic)");
  if (n < kHeader)
    refuse(path, detail::concat("truncated: ", n, " of at least ", kHeader + kTrailer,
                                " bytes (the header is incomplete)"));
  if (core::fnv1a(all.data(), 24) != read_at<std::uint64_t>(all, 24))
    refuse(path, "checksum mismatch in the header (corrupt)");
  const auto version = read_at<std::uint32_t>(all, 8);
  if (version != kVersion)
    refuse(path, detail::concat("format version ", version, "; this build reads format version ",
                                kVersion));
  const auto size = read_at<std::uint64_t>(all, 16);
  if (size < kHeader + kTrailer)
    refuse(path, detail::concat("header gives an impossible file size of ", size, " bytes"));
  if (n < size) refuse(path, detail::concat("truncated: ", n, " of ", size, " bytes"));
  if (n > size)
    refuse(path,
           detail::concat(n, " bytes where the header says ", size, " (trailing data; corrupt)"));
  const auto digest = core::sha256(std::string_view(all).substr(0, n - kTrailer));
  if (std::memcmp(digest.data(), all.data() + n - kTrailer, kTrailer) != 0)
    refuse(path, "checksum mismatch (SHA-256 of the file; corrupt)");
  return std::string_view(all).substr(kHeader, n - kHeader - kTrailer);
}

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
  atomic_write(path, framed_checkpoint(w.bytes()));
}

std::string framed_checkpoint(std::span<const std::byte> payload) {
  const std::uint64_t size = kHeader + payload.size() + kTrailer;
  std::string out(kMagic, sizeof kMagic);
  const std::uint32_t version = kVersion, zero = 0;
  out.append(reinterpret_cast<const char*>(&version), 4);
  out.append(reinterpret_cast<const char*>(&zero), 4);
  out.append(reinterpret_cast<const char*>(&size), 8);
  const std::uint64_t header_hash = core::fnv1a(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&header_hash), 8);
  out.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  const auto digest = core::sha256(out);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out;
}

CheckpointState load_checkpoint_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) refuse(path, "cannot be opened (missing?)");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  const auto payload = checked_payload(path, all);
  // The checksum held, so a reader error here is a bug of the writer, not corruption.
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
  r.expect_end();
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
