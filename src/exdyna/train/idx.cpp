#include "exdyna/train/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "exdyna/core/error.hpp"

namespace exdyna::train {
namespace {

struct GzCloser {
  void operator()(gzFile f) const {
    if (f) gzclose(f);
  }
};
using GzPtr = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// Reads up to n bytes; returns the count read. Throws DataError when zlib reports corruption.
std::size_t read_some(gzFile f, const std::string& path, void* buf, std::size_t n) {
  std::size_t done = 0;
  auto* p = static_cast<unsigned char*>(buf);
  while (done < n) {
    // gzread takes an unsigned count: read in chunks well below 2^31.
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
    const int got = gzread(f, p + done, chunk);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      throw DataError(detail::concat("IDX file ", path, " is corrupt: zlib reports '",
                                     msg ? msg : "?", "' after ", done,
                                     " bytes; re-download or re-install it"));
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::uint32_t be32(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         b[3];
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_dims) {
  if (!std::filesystem::exists(path))
    throw DataError(detail::concat("IDX file ", path, " does not exist"));
  GzPtr f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(detail::concat("cannot open IDX file ", path));
  unsigned char magic[4];
  const auto got = read_some(f.get(), path, magic, 4);
  if (got < 4)
    throw DataError(detail::concat("IDX file ", path, " is truncated: ", got,
                                   " bytes, expected a 4-byte header"));
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 || magic[3] > 4)
    throw DataError(detail::concat("IDX file ", path, " has magic ", static_cast<int>(magic[0]),
                                   ",", static_cast<int>(magic[1]), ",", static_cast<int>(magic[2]),
                                   ",", static_cast<int>(magic[3]),
                                   "; expected 0,0,8,D (unsigned bytes, 1 <= D <= 4 dimensions)"));
  const int nd = magic[3];
  if (expected_dims > 0 && nd != expected_dims)
    throw DataError(
        detail::concat("IDX file ", path, " has ", nd, " dimensions; expected ", expected_dims));
  IdxArray a;
  std::vector<unsigned char> hdr(static_cast<std::size_t>(4 * nd));
  if (read_some(f.get(), path, hdr.data(), hdr.size()) < hdr.size())
    throw DataError(detail::concat("IDX file ", path, " is truncated inside its header"));
  std::uint64_t total = 1;
  for (int i = 0; i < nd; ++i) {
    a.dims.push_back(be32(&hdr[static_cast<std::size_t>(4 * i)]));
    total *= a.dims.back();
  }
  // MNIST-family files are far below this; a larger product means a corrupt header.
  if (total > (std::uint64_t{1} << 34))
    throw DataError(
        detail::concat("IDX file ", path, " claims ", total, " elements; the header is corrupt"));
  // The buffer grows with the bytes that actually arrive: a short file whose header claims
  // gigabytes is refused as truncated without allocating what the header claims.
  constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;
  std::uint64_t have = 0;
  while (have < total) {
    const auto want = std::min(total - have, kChunk);
    a.data.resize(static_cast<std::size_t>(have + want));
    const auto n = read_some(f.get(), path, a.data.data() + have, static_cast<std::size_t>(want));
    have += n;
    if (n < want)
      throw DataError(detail::concat("IDX file ", path, " is truncated: ", have,
                                     " data bytes, expected ", total,
                                     " from its header; re-download or re-install it"));
  }
  unsigned char extra;
  if (read_some(f.get(), path, &extra, 1) != 0)
    throw DataError(detail::concat("IDX file ", path, " has bytes after the ", total,
                                   " elements its header declares; the file is corrupt"));
  return a;
}

void write_idx_gz(const std::string& path, const std::vector<std::uint32_t>& dims,
                  const std::vector<std::uint8_t>& data) {
  GzPtr f(gzopen(path.c_str(), "wb"));
  if (!f) throw Error(detail::concat("cannot write ", path));
  std::vector<unsigned char> hdr = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  for (auto d : dims) {
    hdr.push_back(static_cast<unsigned char>(d >> 24));
    hdr.push_back(static_cast<unsigned char>(d >> 16));
    hdr.push_back(static_cast<unsigned char>(d >> 8));
    hdr.push_back(static_cast<unsigned char>(d));
  }
  if (gzwrite(f.get(), hdr.data(), static_cast<unsigned>(hdr.size())) !=
          static_cast<int>(hdr.size()) ||
      (!data.empty() && gzwrite(f.get(), data.data(), static_cast<unsigned>(data.size())) !=
                            static_cast<int>(data.size())))
    throw Error(detail::concat("writing ", path, " failed"));
}

}  // namespace exdyna::train
