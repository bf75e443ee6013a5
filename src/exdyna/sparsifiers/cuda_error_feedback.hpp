// DeviceErrorFeedback on a CUDA device: the residual lives on the device, acc = residual + grad in
// place, the sparsifier's step_device selects and exchanges, and the averaged update is scattered
// back into the gradient, all on one CUDA stream. Only counts cross to the host. Built only where
// nvcc is found (with exdyna_cuda_kernels).
#pragma once

#include <memory>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/sparsifiers/cuda_device_step.hpp"
#include "exdyna/sparsifiers/cuda_resident_step.hpp"
#include "exdyna/sparsifiers/device_error_feedback.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"

namespace exdyna::sparsifiers {

class CudaErrorFeedback final : public DeviceErrorFeedback {
 public:
  // The sparsifier must run on the device (Sparsifier::runs_on_device); refused otherwise, by name.
  CudaErrorFeedback(std::unique_ptr<Sparsifier> sparsifier, std::int64_t n_g,
                    ErrorFeedbackOptions opt);
  ~CudaErrorFeedback() override;
  CudaErrorFeedback(const CudaErrorFeedback&) = delete;
  CudaErrorFeedback& operator=(const CudaErrorFeedback&) = delete;

  StepStats step(float* grad, comm::Communicator& comm, void* stream) override;
  void residual_to_host(std::span<float> out) override;
  void residual_from_host(std::span<const float> in) override;
  std::int64_t n_g() const override { return n_g_; }
  Sparsifier& sparsifier() override { return *sparsifier_; }
  std::int64_t iteration() const override { return iteration_; }
  void set_iteration(std::int64_t t) override;
  void finish() override;

 private:
  // The ExDyna that runs this step resident (ErrorFeedbackOptions::resident), or none.
  ExDyna* resident_sparsifier();
  StepStats step_resident(ExDyna& x, float* grad, comm::Communicator& comm);
  // The non-finite index of the step before, read with its readback: raise throws for it, skip
  // marks its statistics.
  void check_last_bad(StepStats& finished, int rank);
  std::unique_ptr<Sparsifier> sparsifier_;
  std::int64_t n_g_;
  ErrorFeedbackOptions opt_;
  WarmupPhases warmup_;
  core::device::Workspace ws_;
  CudaDeviceStep device_{ws_};
  core::device::Buffer<float> residual_;
  std::int64_t iteration_ = 0;
  // The resident step: its ResidentStep, the sparsifier with a step pending, and per parity of
  // the iteration the non-finite index and the skip flag (device, and their pinned copies).
  std::unique_ptr<CudaResidentStep> resident_;
  ExDyna* pending_ = nullptr;
  core::device::Buffer<unsigned long long> bad_;
  core::device::Buffer<float> flag_;
  void* pinned_ = nullptr;
  // The last resident step's stream and an event after its update: a next step on another
  // stream waits for it (the residual and the list are still being read there).
  void* last_stream_ = nullptr;
  void* updated_ = nullptr;  // cudaEvent_t
};

}  // namespace exdyna::sparsifiers
