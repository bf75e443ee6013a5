// The CIFAR binary reader (train/datasets): the input is one batch file, loaded as the CIFAR-10
// test split (1 label byte per record) and as the CIFAR-100 test split (coarse + fine label).
#include <cstddef>
#include <cstdint>

#include "exdyna/train/datasets.hpp"
#include "fuzz_support.hpp"

namespace {

void load(exdyna::train::DatasetKind k) {
  exdyna::fuzz::refuse_only_with_our_errors([&] {
    const auto d =
        exdyna::train::load_image_dataset(k, exdyna::fuzz::scratch_dir().string(), false);
    if (d.pixels.size() != static_cast<std::size_t>(d.size() * d.sample_bytes())) __builtin_trap();
    for (auto l : d.labels)
      if (l < 0 || l >= d.num_classes) __builtin_trap();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  fuzz::write_bytes(fuzz::scratch_dir() / "test_batch.bin", data, size);
  fuzz::write_bytes(fuzz::scratch_dir() / "test.bin", data, size);
  load(train::DatasetKind::kCifar10);
  load(train::DatasetKind::kCifar100);
  return 0;
}
