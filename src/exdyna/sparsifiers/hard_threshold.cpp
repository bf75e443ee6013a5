#include "exdyna/sparsifiers/hard_threshold.hpp"

#include <cmath>
#include <sstream>

#include "exdyna/core/huge_pages.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

HardThreshold::HardThreshold(const SparsifierConfig& cfg)
    : ThresholdUnion(cfg, ThresholdSource::kShared),
      threshold_(cfg.hard_threshold >= 0 ? cfg.hard_threshold
                                         : 1.0 / (2.0 * std::sqrt(static_cast<double>(cfg.k())))) {}

ThresholdSelection HardThreshold::select(std::span<const float> acc, std::vector<Index>& indices) {
  core::resize_huge(indices, acc.size());  // select_threshold needs room for every element
  // Plainly in float, not as an estimate: a configured threshold of 0 selects exact zeros too.
  return {threshold_, select_threshold(acc, static_cast<float>(threshold_), 0, indices.data())};
}

std::string HardThreshold::fingerprint() const {
  std::ostringstream os;
  os.precision(17);
  os << "hard-threshold;threshold=" << threshold_ << ";" << cfg().fingerprint();
  return os.str();
}

}  // namespace exdyna::sparsifiers
