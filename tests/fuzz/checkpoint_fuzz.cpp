// Training checkpoint files (train/checkpoint), the reading side. The first input byte picks
// how the rest is used: even, as the file's bytes; odd, as the payload, wrapped in the magic,
// length and checksum header the writer puts in front, so that the fuzzer gets past the checksum
// to the field parser. (train_checkpoint's comparison of the loaded state with the run links
// libtorch and is not fuzzed here.)
#include <cstddef>
#include <cstdint>
#include <string>

#include "exdyna/core/hash.hpp"
#include "exdyna/train/checkpoint.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  if (size == 0) return 0;
  const auto path = fuzz::scratch_dir() / "rank-0.bin";
  if (data[0] % 2 == 0) {
    fuzz::write_bytes(path, data + 1, size - 1);
  } else {
    const std::uint64_t len = size - 1, h = core::fnv1a(data + 1, size - 1);
    std::string file("EXDYCKP1", 8);
    file.append(reinterpret_cast<const char*>(&len), 8);
    file.append(reinterpret_cast<const char*>(&h), 8);
    file.append(reinterpret_cast<const char*>(data + 1), size - 1);
    fuzz::write_bytes(path, reinterpret_cast<const std::uint8_t*>(file.data()), file.size());
  }
  fuzz::refuse_only_with_our_errors([&] { (void)train::load_checkpoint_file(path.string()); });
  return 0;
}
