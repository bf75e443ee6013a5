// Error feedback (error_feedback.hpp) on a gradient in device memory: the GPU path of the Python
// package. This header is plain C++; the implementation over CUDA (cuda_error_feedback.hpp) is
// built only where nvcc is found, and a build without it answers device_path_built() == false and
// refuses to make one (device_path_none.cpp): the one place that knows which build this is.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "exdyna/sparsifiers/error_feedback.hpp"

namespace exdyna::sparsifiers {

class DeviceErrorFeedback {
 public:
  virtual ~DeviceErrorFeedback() = default;
  // grad: n_g float32 values in device memory, this worker's raw gradient on entry and the
  // averaged sparse update on exit. stream: the cudaStream_t (as void*) the caller's work runs on
  // (PyTorch's current stream), where every kernel and collective of the step is ordered. Throws
  // DataError naming the first non-finite element before anything is exchanged.
  virtual StepStats step(float* grad, comm::Communicator& comm, void* stream) = 0;
  // The residual, copied to or from host memory (checkpoints).
  virtual void residual_to_host(std::span<float> out) = 0;
  virtual void residual_from_host(std::span<const float> in) = 0;
  virtual std::int64_t n_g() const = 0;
  virtual Sparsifier& sparsifier() = 0;
  virtual std::int64_t iteration() const = 0;
  virtual void set_iteration(std::int64_t t) = 0;
  // Brings the host's part of a pending resident step (ErrorFeedbackOptions::resident) up to date
  // (waiting for the device if it is behind); nothing otherwise. Before the sparsifier's state is
  // read or replaced.
  virtual void finish() = 0;
};

// Whether this build has the GPU path.
bool device_path_built();
// Error feedback on the device around `sparsifier` (which must run there: runs_on_device).
// Throws InvalidArgument where the build has no GPU path or no device is visible.
std::unique_ptr<DeviceErrorFeedback> make_device_error_feedback(
    std::unique_ptr<Sparsifier> sparsifier, std::int64_t n_g, ErrorFeedbackOptions opt);

}  // namespace exdyna::sparsifiers
