#include "exdyna/sparsifiers/dense.hpp"

#include "exdyna/sparsifiers/sparse_exchange.hpp"

#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {

void Dense::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                 StepStats& stats) {
  core::Stopwatch sw;
  out.dense = true;
  out.indices.clear();
  out.values.assign(acc.begin(), acc.end());
  allreduce_values(comm, cfg_.values, out);
  stats.times.allreduce = sw.lap();
  stats.k_target = stats.n_g;
  stats.target_density = 1.0;
  stats.k_per_worker.assign(static_cast<std::size_t>(comm.size()),
                            static_cast<std::int64_t>(acc.size()));
  stats.finish_counts();
  // Every worker contributes every value: nothing is selected, so report density 1, no padding.
  stats.k_unique = static_cast<std::int64_t>(acc.size());
  stats.density = 1.0;
  stats.density_error = 0.0;
  stats.f_t = 1.0;
  stats.padded_elements = 0;
}

}  // namespace exdyna::sparsifiers
