// The IDX reader (train/idx): the input is the file's bytes, gzip-compressed or plain (zlib's
// gzopen reads both), read as the MNIST loader does.
#include <cstddef>
#include <cstdint>

#include "exdyna/train/idx.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  const auto path = fuzz::scratch_dir() / "input.idx";
  fuzz::write_bytes(path, data, size);
  fuzz::refuse_only_with_our_errors([&] {
    const auto a = train::read_idx(path.string());
    // What it returns must be consistent: dims' product equals the data size.
    std::uint64_t total = 1;
    for (auto d : a.dims) total *= d;
    if (total != a.data.size()) __builtin_trap();
  });
  return 0;
}
