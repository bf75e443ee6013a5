// What the summary of `exdyna simulate` needs from every iteration, kept compactly: the density
// and f(t) series (the summary's windows, settling and recoveries read them), the measured global
// errors, byte and padding sums, and a running FNV-1a of the decisions CSV. A long run without
// CSV outputs keeps this instead of one StepStats per iteration (24 instead of ~430 bytes per
// iteration; a 20,000-iteration soak must not grow), and two runs are compared by
// the digest alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exdyna/comm/byte_counts.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sim {

class StepSeries {
 public:
  explicit StepSeries(int workers = 0);
  // Room for `iterations` steps up front: a growing vector would hold up to twice what it uses,
  // and the untouched reserve costs no resident memory until the steps fill it.
  void reserve(std::int64_t iterations);
  void add(const sparsifiers::StepStats& st);

  std::int64_t size() const { return static_cast<std::int64_t>(density_.size()); }
  const std::vector<double>& density() const { return density_; }
  const std::vector<double>& f_t() const { return f_t_; }
  const std::vector<double>& global_error() const { return global_error_; }  // measured only
  const comm::ByteCounts& bytes() const { return bytes_; }                   // sums
  double padded_elements() const { return padded_; }                         // sum
  // Iteration 0's target as the sparsifier reported it (0 when no iteration ran).
  double target_density() const { return target_density_; }
  std::int64_t k_target() const { return k_target_; }
  // FNV-1a of the text decisions_csv would write for the same steps (header included).
  std::uint64_t decisions_fnv1a() const { return digest_; }

 private:
  int workers_;
  std::vector<double> density_, f_t_, global_error_;
  comm::ByteCounts bytes_;
  double padded_ = 0;
  double target_density_ = 0;
  std::int64_t k_target_ = 0;
  std::uint64_t digest_ = core::kFnv1aOffset;
  std::string row_;  // reused for each decisions row
};

// The digest as printed: 16 lowercase hex digits.
std::string digest_hex(std::uint64_t h);

}  // namespace exdyna::sim
