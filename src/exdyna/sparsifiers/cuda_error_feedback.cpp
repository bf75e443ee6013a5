#include "exdyna/sparsifiers/cuda_error_feedback.hpp"

#include <cuda_runtime_api.h>

#include <limits>
#include <vector>

#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/device_error_feedback_testing.hpp"
#include "exdyna/sparsifiers/non_finite_step.hpp"
#include "exdyna/sparsifiers/step_clipping.hpp"

namespace exdyna::sparsifiers {

namespace dev = core::device;

CudaErrorFeedback::CudaErrorFeedback(std::unique_ptr<Sparsifier> sparsifier, std::int64_t n_g,
                                     ErrorFeedbackOptions opt)
    : sparsifier_(std::move(sparsifier)),
      n_g_(n_g),
      opt_(opt),
      warmup_(opt_.convergence, opt_.density, opt_.remake) {
  EXDYNA_CHECK_ARG(sparsifier_ != nullptr, "error feedback needs a sparsifier");
  EXDYNA_CHECK_ARG(opt_.convergence.momentum_correction == 0 && opt_.convergence.local_clip == 0,
                   "momentum_correction and local_clip run on CPU tensors only in this version; "
                   "on CUDA tensors leave them at 0 (warmup_steps and step_clip run on both)");
  EXDYNA_CHECK_ARG(sparsifier_->runs_on_device(), "sparsifier '", sparsifier_->name(),
                   "' with these options has no GPU path; on a CUDA gradient these run: exdyna "
                   "(controller paper or exact, values fp32), dense (values fp32)");
  EXDYNA_CHECK_ARG(n_g > 0, "n_g ", n_g, " is not valid; expected > 0");
  if (opt_.resident) {
    const auto* x = dynamic_cast<const ExDyna*>(sparsifier_.get());
    EXDYNA_CHECK_ARG(x != nullptr && x->runs_resident(),
                     "option resident=True runs exdyna's exact controller with float32 values "
                     "under a worker cap (worker_cap='auto', the default) or on one rank; "
                     "sparsifier '",
                     sparsifier_->name(), "' with these options does not");
  }
  residual_.resize(static_cast<std::size_t>(n_g));
  const std::vector<float> zeros(static_cast<std::size_t>(n_g), 0.0f);
  residual_from_host(zeros);
  warmup_.enter(iteration_, sparsifier_);
}

CudaErrorFeedback::~CudaErrorFeedback() {
  if (pinned_ != nullptr) cudaFreeHost(pinned_);
  if (updated_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(updated_));
}

void CudaErrorFeedback::set_iteration(std::int64_t t) {
  finish();
  iteration_ = t;
  warmup_.enter(iteration_, sparsifier_);
}

ExDyna* CudaErrorFeedback::resident_sparsifier() {
  const auto& c = opt_.convergence;
  if (!opt_.resident || c.step_clip > 0 || opt_.measure_global_error ||
      (c.warmup_steps > 0 && iteration_ <= c.warmup_steps))
    return nullptr;
  auto* x = dynamic_cast<ExDyna*>(sparsifier_.get());
  return x != nullptr && x->runs_resident() && x->iteration() >= 1 ? x : nullptr;
}

void CudaErrorFeedback::finish() {
  if (pending_ == nullptr) return;
  StepStats finished;
  pending_->finish_resident(*resident_, finished);
  pending_ = nullptr;
  check_last_bad(finished, -1);
}

void CudaErrorFeedback::check_last_bad(StepStats& finished, int rank) {
  // The step before this one: its words came back with its readback, which has been waited for.
  const auto* h = static_cast<const unsigned long long*>(pinned_);
  const std::size_t last = static_cast<std::size_t>((iteration_ - 1) & 1);
  const unsigned long long bad = h[last];
  const float flag = reinterpret_cast<const float*>(h + 2)[last];
  if (opt_.convergence.non_finite == NonFinite::kSkip) {
    if (flag > 0) mark_skipped(finished);
    return;
  }
  if (bad != ~0ull)
    throw non_finite_gradient(static_cast<std::int64_t>(bad), iteration_ - 1, rank,
                              std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::quiet_NaN());
}

StepStats CudaErrorFeedback::step_resident(ExDyna& x, float* grad, comm::Communicator& comm) {
  core::Stopwatch sw;
  if (!resident_) {
    resident_ = std::make_unique<CudaResidentStep>(ws_);
    bad_.resize(2);
    flag_.resize(2);
    auto e = cudaMallocHost(&pinned_, 4 * sizeof(unsigned long long));
    EXDYNA_CHECK(e == cudaSuccess, "cudaMallocHost (resident flags): ", cudaGetErrorString(e));
    cudaEvent_t ev = nullptr;
    e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    EXDYNA_CHECK(e == cudaSuccess, "cudaEventCreate (resident update): ", cudaGetErrorString(e));
    updated_ = ev;
  } else if (ws_.stream() != last_stream_) {
    const auto e = cudaStreamWaitEvent(static_cast<cudaStream_t>(ws_.stream()),
                                       static_cast<cudaEvent_t>(updated_), 0);
    EXDYNA_CHECK(e == cudaSuccess,
                 "cudaStreamWaitEvent (resident update): ", cudaGetErrorString(e));
  }
  const std::size_t now = static_cast<std::size_t>(iteration_ & 1);
  const bool skip = opt_.convergence.non_finite == NonFinite::kSkip;
  dev::accumulate_async(ws_, residual_.data(), grad, n_g_, bad_.data() + now,
                        skip ? flag_.data() + now : nullptr);
  const auto s = static_cast<cudaStream_t>(ws_.stream());
  auto* h = static_cast<unsigned long long*>(pinned_);
  StepStats stats;
  const auto bytes_before = comm.bytes();
  if (skip) comm.allreduce_sum_device(flag_.data() + now, 1);  // how many ranks hold a non-finite
  // Copied before the step's readback is posted, so that the next step finds them there.
  auto ok = cudaMemcpyAsync(h + now, bad_.data() + now, sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost, s);
  if (ok == cudaSuccess && skip)
    ok = cudaMemcpyAsync(reinterpret_cast<float*>(h + 2) + now, flag_.data() + now, sizeof(float),
                         cudaMemcpyDeviceToHost, s);
  EXDYNA_CHECK(ok == cudaSuccess, "cudaMemcpyAsync (resident flags): ", cudaGetErrorString(ok));
  stats.times.accumulate = sw.lap();
  const bool finishing = pending_ != nullptr;
  pending_ = nullptr;  // finished by step_resident (or failed there: nothing left to finish)
  x.step_resident(residual_.data(), *resident_, comm, stats);  // the step before's statistics
  pending_ = &x;
  if (finishing) check_last_bad(stats, comm.rank());
  stats.bytes = comm.bytes() - bytes_before;
  sw.lap();
  const float scale = 1.0f / static_cast<float>(comm.size());
  if (skip)
    dev::resident_update(ws_, grad, residual_.data(), n_g_, resident_->list(), resident_->sums(),
                         x.k(), scale, flag_.data() + now);
  else
    dev::scatter_update(ws_, grad, residual_.data(), n_g_, resident_->list(), resident_->sums(),
                        x.k(), scale);
  const auto e = cudaEventRecord(static_cast<cudaEvent_t>(updated_), s);
  EXDYNA_CHECK(e == cudaSuccess, "cudaEventRecord (resident update): ", cudaGetErrorString(e));
  last_stream_ = ws_.stream();
  stats.times.update = sw.lap();
  stats.iteration = iteration_ - 1;  // the statistics are the step before's
  stats.world_size = comm.size();
  stats.n_g = finishing ? n_g_ : 0;  // none finished: nothing selected out of nothing
  ++iteration_;
  return stats;
}

StepStats CudaErrorFeedback::step(float* grad, comm::Communicator& comm, void* stream) {
  ws_.set_stream(stream);
  if (ExDyna* x = resident_sparsifier()) return step_resident(*x, grad, comm);
  finish();  // the resident steps ended (a state was asked for, or the options changed)
  StepStats stats;
  stats.iteration = iteration_;
  stats.world_size = comm.size();
  stats.n_g = n_g_;

  core::Stopwatch sw;
  warmup_.enter(iteration_, sparsifier_);
  const auto acc = dev::accumulate(ws_, residual_.data(), grad, n_g_, opt_.measure_global_error);
  comm::ByteCounts flag_bytes;
  if (opt_.convergence.non_finite == NonFinite::kSkip &&
      any_rank_non_finite(acc.first_bad >= 0, comm, flag_bytes)) {
    dev::undo_accumulate_and_poison(ws_, grad, residual_.data(), n_g_);
    stats.bytes = flag_bytes;
    mark_skipped(stats);
    return stats;
  }
  if (acc.first_bad >= 0) {
    float g = 0, r = 0;  // two values cross to the host, to name the offender
    dev::copy_to_host(ws_, &g, grad + acc.first_bad, sizeof(float));
    dev::copy_to_host(ws_, &r, residual_.data() + acc.first_bad, sizeof(float));
    throw non_finite_gradient(acc.first_bad, iteration_, comm.rank(), g, r + g);
  }
  stats.times.accumulate = sw.lap();

  if (opt_.measure_global_error) stats.global_error = mean_residual_norm(acc.residual_sq, comm);
  sw.lap();

  const auto bytes_before = comm.bytes();
  sparsifier_->step_device(residual_.data(), device_, comm, stats);
  stats.bytes = comm.bytes() - bytes_before;
  stats.bytes += flag_bytes;
  sw.lap();

  // step_clip's scale folds into the update's 1/n, and the residual at the sent indices is zeroed
  // all the same: what the clip takes off is dropped, as on the CPU (step_clipping.hpp).
  const std::int64_t sent = device_.dense() ? n_g_ : device_.gathered_count();
  const double s = opt_.convergence.step_clip > 0
                       ? step_clip_scale_of_squares(dev::sum_squares(ws_, device_.sums(), sent),
                                                    1.0 / comm.size(), opt_.convergence.step_clip)
                       : 1.0;
  stats.step_scale = s;
  const float n = static_cast<float>(comm.size());
  const float scale = s < 1 ? static_cast<float>(s) / n : 1.0f / n;  // the CPU's rounding
  if (device_.dense())
    dev::dense_update(ws_, grad, residual_.data(), device_.sums(), n_g_, scale);
  else
    dev::scatter_update(ws_, grad, residual_.data(), n_g_, device_.gathered(), device_.sums(), sent,
                        scale);
  stats.times.update = sw.lap();
  ++iteration_;
  return stats;
}

void CudaErrorFeedback::residual_to_host(std::span<float> out) {
  finish();
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(out.size()) == n_g_, "residual of ", out.size(),
                   " elements asked for; expected n_g = ", n_g_);
  dev::copy_to_host(ws_, out.data(), residual_.data(), out.size_bytes());
}

void CudaErrorFeedback::residual_from_host(std::span<const float> in) {
  finish();
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(in.size()) == n_g_, "residual of ", in.size(),
                   " elements given; expected n_g = ", n_g_);
  dev::copy_to_device(ws_, residual_.data(), in.data(), in.size_bytes());
}

bool device_path_built() {
  return true;
}

std::unique_ptr<DeviceErrorFeedback> make_device_error_feedback(
    std::unique_ptr<Sparsifier> sparsifier, std::int64_t n_g, ErrorFeedbackOptions opt) {
  EXDYNA_CHECK_ARG(dev::available(), "no CUDA device is visible to this process");
  return std::make_unique<CudaErrorFeedback>(std::move(sparsifier), n_g, opt);
}

std::int64_t device_select_threshold(const float* acc, std::int64_t n, float threshold,
                                     std::uint32_t* out, void* stream) {
  thread_local dev::Workspace ws;
  ws.set_stream(stream);
  return device::select_threshold(ws, acc, n, threshold, 0, out);
}

std::int64_t device_accumulate(float* residual, const float* grad, std::int64_t n, void* stream) {
  thread_local dev::Workspace ws;
  ws.set_stream(stream);
  return dev::accumulate(ws, residual, grad, n, false).first_bad;
}

}  // namespace exdyna::sparsifiers
