// The GPU path's entry points in a build without CUDA (see device_error_feedback.hpp): they say
// so, by name, instead of failing to link or to run.
#include "exdyna/sparsifiers/device_error_feedback.hpp"
#include "exdyna/sparsifiers/device_error_feedback_testing.hpp"

namespace exdyna::sparsifiers {

namespace {
[[noreturn]] void refuse() {
  throw InvalidArgument(
      "this exdyna build has no GPU path (built without CUDA: rebuild where nvcc is found, "
      "e.g. pip install --no-build-isolation . on a machine with the CUDA toolkit); use CPU "
      "tensors and a gloo or mpi group");
}
}  // namespace

bool device_path_built() {
  return false;
}

std::unique_ptr<DeviceErrorFeedback> make_device_error_feedback(std::unique_ptr<Sparsifier>,
                                                                std::int64_t,
                                                                ErrorFeedbackOptions) {
  refuse();
}

std::int64_t device_select_threshold(const float*, std::int64_t, float, std::uint32_t*, void*) {
  refuse();
}

std::int64_t device_accumulate(float*, const float*, std::int64_t, void*) {
  refuse();
}

}  // namespace exdyna::sparsifiers
