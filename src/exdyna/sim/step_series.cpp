#include "exdyna/sim/step_series.hpp"

#include <cmath>
#include <cstdio>

#include "exdyna/sim/step_csv.hpp"

namespace exdyna::sim {

StepSeries::StepSeries(int workers) : workers_(workers) {
  const std::string header = decisions_header(workers_);
  digest_ = core::fnv1a(header.data(), header.size());
}

void StepSeries::reserve(std::int64_t iterations) {
  const auto n = static_cast<std::size_t>(iterations > 0 ? iterations : 0);
  density_.reserve(n);
  f_t_.reserve(n);
  global_error_.reserve(n);
}

void StepSeries::add(const sparsifiers::StepStats& st) {
  if (density_.empty()) {
    target_density_ = st.target_density;
    k_target_ = st.k_target;
  }
  density_.push_back(st.density);
  f_t_.push_back(st.f_t);
  if (!std::isnan(st.global_error)) global_error_.push_back(st.global_error);
  bytes_ += st.bytes;
  padded_ += static_cast<double>(st.padded_elements);
  row_.clear();
  append_decisions_row(row_, st, workers_);
  digest_ = core::fnv1a(row_.data(), row_.size(), digest_);
}

std::string digest_hex(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace exdyna::sim
