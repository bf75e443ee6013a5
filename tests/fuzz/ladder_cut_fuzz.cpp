// The exact controller's selection kernels, differentially: every kernel's ladder candidates and
// cut must equal the scalar reference's on any values (NaN, infinities, subnormals, -0 and values
// above the ladder included), any grid and any count to keep. The input: 4 bytes of parameters
// (mantissa bits, rungs, the lowest rung's key, the fraction of the candidates to keep), then the
// partition's floats. Not a file parser: a disagreement between kernels is the finding (a trap).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace {

using exdyna::sparsifiers::LadderGrid;
using exdyna::sparsifiers::SelectKernel;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

struct Reference {
  std::vector<std::uint32_t> kept;  // the scalar cut's indices
  std::vector<std::int64_t> bins;
  std::size_t candidates = 0;
};

Reference scalar_cut(const std::vector<float>& part, const LadderGrid& grid, std::uint32_t offset,
                     int rung, std::int64_t quota) {
  Reference r;
  const std::size_t n = part.size();
  r.kept.resize(n);
  std::vector<float> abs(n);
  r.bins.assign(static_cast<std::size_t>(grid.rungs), 0);
  r.candidates = exdyna::sparsifiers::collect_ladder_candidates_with(
      SelectKernel::kScalar, part, offset, grid, r.kept.data(), abs.data(), r.bins.data());
  r.kept.resize(exdyna::sparsifiers::take_cut_with(SelectKernel::kScalar, r.kept.data(), abs.data(),
                                                   r.candidates, grid, rung, quota));
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna::sparsifiers;
  if (size < 4) return 0;
  LadderGrid grid;
  grid.mant_bits = data[0] % 8;  // the word path's range (<= 7), and the cold ladder's 0
  grid.rungs = 2 + data[1] % 255;
  // Around 2^-20..2^12 in value, so that the inputs' floats fall on, below and above the ladder.
  grid.lo_key = ((107u + data[2] % 32u) << grid.mant_bits) + data[3] % (1u << grid.mant_bits);
  const std::size_t n = std::min<std::size_t>((size - 4) / sizeof(float), 1 << 16);
  std::vector<float> part(n);
  if (n > 0) std::memcpy(part.data(), data + 4, n * sizeof(float));
  const std::uint32_t offset = 7;
  // The count to keep: the parameter byte's share of the candidates, from none to all.
  std::vector<std::int64_t> bins(static_cast<std::size_t>(grid.rungs), 0);
  std::vector<std::uint32_t> idx(n);
  std::vector<float> abs(n);
  const auto total = collect_ladder_candidates_with(SelectKernel::kScalar, part, offset, grid,
                                                    idx.data(), abs.data(), bins.data());
  const auto count = static_cast<std::int64_t>(total * (data[2] ^ data[3]) / 255);
  const auto [rung, quota] = own_cut(bins, count);
  const Reference ref = scalar_cut(part, grid, offset, rung, quota);
  require(static_cast<std::int64_t>(ref.kept.size()) == count);
  for (auto k : {SelectKernel::kSse2, SelectKernel::kAvx2, SelectKernel::kAvx512}) {
    if (!select_kernel_available(k)) continue;
    std::vector<std::int64_t> b(bins.size(), 0);
    std::vector<std::uint32_t> i2(n);
    std::vector<float> a2(n);
    const auto c =
        collect_ladder_candidates_with(k, part, offset, grid, i2.data(), a2.data(), b.data());
    require(c == ref.candidates && b == ref.bins);
    i2.resize(take_cut_with(k, i2.data(), a2.data(), c, grid, rung, quota));
    require(i2 == ref.kept);
  }
  if (ladder_words_fit(select_kernel_in_use(), n, grid)) {
    // The sparsifier's one-pass path: words and sub-bins, cut without the partition.
    std::vector<std::uint32_t> words(n);
    std::vector<std::uint8_t> subs(n);
    std::vector<std::int64_t> b(bins.size(), 0);
    const auto c = collect_ladder_words(part, grid, words.data(), subs.data(), b.data());
    require(c == ref.candidates && b == ref.bins);
    words.resize(take_cut_words(offset, words.data(), subs.data(), c, grid, rung, quota));
    require(words == ref.kept);
  }
  return 0;
}
