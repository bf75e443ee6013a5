#include "exdyna/sparsifiers/dense.hpp"

#include "exdyna/sparsifiers/sparse_exchange.hpp"

#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/device_step.hpp"

namespace exdyna::sparsifiers {

namespace {

// Every worker contributes every value: nothing is selected, so density 1, no padding.
void fill_dense_stats(std::int64_t n_g, int workers, StepStats& stats) {
  stats.k_target = stats.n_g;
  stats.target_density = 1.0;
  stats.k_per_worker.assign(static_cast<std::size_t>(workers), n_g);
  stats.finish_counts();
  stats.k_unique = n_g;
  stats.density = 1.0;
  stats.density_error = 0.0;
  stats.f_t = 1.0;
  stats.padded_elements = 0;
}

}  // namespace

void Dense::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                 StepStats& stats) {
  core::Stopwatch sw;
  out.dense = true;
  out.indices.clear();
  out.values.assign(acc.begin(), acc.end());
  allreduce_values(comm, cfg_.values, out);
  stats.times.allreduce = sw.lap();
  fill_dense_stats(static_cast<std::int64_t>(acc.size()), comm.size(), stats);
}

void Dense::step_device(const float* acc, DeviceStep& device, comm::Communicator& comm,
                        StepStats& stats) {
  EXDYNA_CHECK_ARG(runs_on_device(), "dense on the GPU sends float32 values; values ",
                   core::to_string(cfg_.values), " is not supported there");
  core::Stopwatch sw;
  device.exchange_dense(acc, cfg_.n_g, comm);
  stats.times.allreduce = sw.lap();
  fill_dense_stats(cfg_.n_g, comm.size(), stats);
}

}  // namespace exdyna::sparsifiers
