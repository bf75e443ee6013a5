// IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain, read directly with zlib.
//
// Layout: a big-endian magic 0x0000 TT DD (TT = element type, 0x08 = unsigned byte; DD = number of
// dimensions), DD big-endian uint32 sizes, then the elements row-major. Only unsigned-byte files
// are accepted (that is what every MNIST-family file is).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace exdyna::train {

struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;  // product(dims) bytes, row-major
};

// Reads `path` (gzip or plain). Throws DataError naming the file and what is wrong: missing,
// not gzip-decodable, wrong magic, a data section shorter than the header promises (truncated),
// trailing bytes, or `expected_dims` differing from the file's (when expected_dims > 0).
IdxArray read_idx(const std::string& path, int expected_dims = 0);

// Writes a gzip IDX file of unsigned bytes (used by tests to build fixtures).
void write_idx_gz(const std::string& path, const std::vector<std::uint32_t>& dims,
                  const std::vector<std::uint8_t>& data);

}  // namespace exdyna::train
