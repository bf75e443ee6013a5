// Training checkpoint files (train/checkpoint), the reading side. The first input byte picks
// how the rest is used: even, as the file's bytes; odd, as the payload, framed as the writer
// frames it (header with its checksum, SHA-256 trailer: train::framed_checkpoint), so that the
// fuzzer gets past the checksums to the field parser. (train_checkpoint's comparison of the loaded
// state with the run links libtorch and is not fuzzed here.)
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "exdyna/train/checkpoint.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  if (size == 0) return 0;
  const auto path = fuzz::scratch_dir() / "rank-0.bin";
  if (data[0] % 2 == 0) {
    fuzz::write_bytes(path, data + 1, size - 1);
  } else {
    const auto file =
        train::framed_checkpoint(std::span(reinterpret_cast<const std::byte*>(data + 1), size - 1));
    fuzz::write_bytes(path, reinterpret_cast<const std::uint8_t*>(file.data()), file.size());
  }
  fuzz::refuse_only_with_our_errors([&] { (void)train::load_checkpoint_file(path.string()); });
  return 0;
}
