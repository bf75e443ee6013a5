// A trace directory (sim/trace_format, sim/trace_source): the input up to its first NUL byte is
// meta.json, the rest grads.f32 (no NUL: no grads.f32). Opened as `simulate --trace` does, then
// every (iteration, worker) gradient is read.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "exdyna/sim/trace_source.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  const auto dir = fuzz::scratch_dir() / "trace";
  static const bool made = std::filesystem::create_directories(dir);
  (void)made;
  const std::string_view in = fuzz::as_text(data, size);
  const auto cut = in.find('\0');
  fuzz::write_bytes(dir / sim::kTraceMetaFile, data, std::min(cut, size));
  std::filesystem::remove(dir / sim::kTraceDataFile);
  if (cut != std::string_view::npos)
    fuzz::write_bytes(dir / sim::kTraceDataFile, data + cut + 1, size - cut - 1);
  fuzz::refuse_only_with_our_errors([&] {
    sim::TraceSource src(dir);
    // The data file's size equals meta's product, and the input is small: so is every gradient.
    std::vector<float> grad(static_cast<std::size_t>(src.n_g()));
    for (std::int64_t t = 0; t < src.iterations(); ++t)
      for (int w = 0; w < src.workers(); ++w) src.fill(t, w, grad);
  });
  return 0;
}
