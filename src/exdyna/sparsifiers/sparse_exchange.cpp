#include "exdyna/sparsifiers/sparse_exchange.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "exdyna/core/huge_pages.hpp"
#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {

void union_of_sorted_lists(std::span<const Index> lists, std::span<const std::int64_t> counts,
                           std::vector<Index>& out, std::vector<Index>& scratch,
                           std::vector<std::size_t>& bounds) {
  // Run boundaries: run j is [bounds[j], bounds[j+1]). Empty runs are harmless.
  bounds.clear();
  bounds.push_back(0);
  for (auto c : counts) bounds.push_back(bounds.back() + static_cast<std::size_t>(c));
  EXDYNA_CHECK_EQ(bounds.back(), lists.size(),
                  "union_of_sorted_lists: counts do not add up to the lists");
  core::resize_huge(out, lists.size());
  std::copy(lists.begin(), lists.end(), out.begin());
  core::resize_huge(scratch, out.size());
  // Merge neighbouring runs until one is left; std::merge keeps duplicates, removed at the end.
  // The halved boundary list is compacted in place (write position <= read position).
  auto at = [](std::vector<Index>& v, std::size_t i) {
    return v.begin() + static_cast<std::ptrdiff_t>(i);
  };
  while (bounds.size() > 2) {
    std::size_t j = 0, w = 0;
    for (; j + 2 < bounds.size(); j += 2) {
      std::merge(at(out, bounds[j]), at(out, bounds[j + 1]), at(out, bounds[j + 1]),
                 at(out, bounds[j + 2]), at(scratch, bounds[j]));
      bounds[w++] = bounds[j];
    }
    if (j + 1 < bounds.size()) {  // an odd run left over: copy it as is
      std::copy(at(out, bounds[j]), at(out, bounds[j + 1]), at(scratch, bounds[j]));
      bounds[w++] = bounds[j];
    }
    bounds[w++] = bounds.back();
    bounds.resize(w);
    out.swap(scratch);
  }
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

void allreduce_values(comm::Communicator& comm, core::ValueFormat values, SparseResult& out) {
  out.values_format = values;
  if (values == core::ValueFormat::kFp32) {
    comm.allreduce_sum(out.values);
    return;
  }
  for (std::size_t j = 0; j < out.values.size(); ++j) {
    const float v = out.values[j];
    out.values[j] = core::round_to_format(v, values);
    if (!std::isfinite(out.values[j]))
      throw DataError(detail::concat("--values ", core::to_string(values), ": accumulated value ",
                                     v, " at position ", j, " on rank ", comm.rank(),
                                     " overflows the format; expected |value| < 65504 (or use "
                                     "--values bf16)"));
  }
  comm.allreduce_sum_16(out.values, values);
}

void exchange_union(std::span<const float> acc, std::span<const Index> mine,
                    std::span<const std::int64_t> riders, comm::Communicator& comm,
                    comm::GatherMode mode, core::ValueFormat values, SparseResult& out,
                    StepStats& stats, ExchangeBuffers& bufs) {
  core::PhaseStopwatch sw;
  const auto n = static_cast<std::size_t>(comm.size());
  const std::size_t width = 1 + riders.size();
  bufs.mine_header.resize(width);
  bufs.mine_header[0] = static_cast<std::int64_t>(mine.size());
  std::copy(riders.begin(), riders.end(), bufs.mine_header.begin() + 1);
  bufs.headers.resize(width * n);
  comm.allgather_counts(bufs.mine_header, bufs.headers);
  bufs.counts.resize(n);
  for (std::size_t r = 0; r < n; ++r) bufs.counts[r] = bufs.headers[r * width];
  std::int64_t total = 0;
  for (auto c : bufs.counts) total += c;
  core::resize_huge(bufs.gathered, static_cast<std::size_t>(total));  // before the engine writes it
  comm.allgather_list<Index>(mine, bufs.counts, mode, bufs.gathered);
  stats.times.allgather += sw.lap();

  union_of_sorted_lists(bufs.gathered, bufs.counts, out.indices, bufs.merge_scratch,
                        bufs.run_bounds);
  out.dense = false;
  core::resize_huge(out.values, out.indices.size());
  for (std::size_t j = 0; j < out.indices.size(); ++j) {
    const Index i = out.indices[j];
    EXDYNA_CHECK(i < acc.size(), "gathered index ", i, " is outside the gradient of ", acc.size(),
                 " elements");
    out.values[j] = acc[i];
  }
  stats.times.select += sw.lap();  // the union is selection work, done on every rank
  stats.times.select_cpu += sw.last_cpu();
  allreduce_values(comm, values, out);
  stats.times.allreduce += sw.lap();

  stats.k_per_worker.assign(bufs.counts.begin(), bufs.counts.end());
  stats.finish_counts();
  stats.k_unique = static_cast<std::int64_t>(out.indices.size());
}

std::span<const std::int64_t> riders_of(const ExchangeBuffers& bufs, int r) {
  const std::size_t width = bufs.mine_header.size();
  return std::span<const std::int64_t>(bufs.headers)
      .subspan(static_cast<std::size_t>(r) * width + 1, width - 1);
}

void exchange_union_with_threshold(std::span<const float> acc, std::span<const Index> mine,
                                   double threshold, comm::Communicator& comm,
                                   comm::GatherMode mode, core::ValueFormat values,
                                   SparseResult& out, StepStats& stats, ExchangeBuffers& bufs) {
  const std::int64_t rider = std::bit_cast<std::int64_t>(threshold);
  exchange_union(acc, mine, std::span<const std::int64_t>(&rider, 1), comm, mode, values, out,
                 stats, bufs);
  double sum = 0;
  for (int r = 0; r < comm.size(); ++r) sum += std::bit_cast<double>(riders_of(bufs, r)[0]);
  stats.threshold = sum / comm.size();
}

}  // namespace exdyna::sparsifiers
