#include "exdyna/sparsifiers/sparsifier.hpp"

#include <string>

#include "exdyna/core/byte_io.hpp"

namespace exdyna::sparsifiers {

std::vector<std::byte> save_iteration_state(std::int64_t iteration) {
  core::ByteWriter w;
  w.put(iteration);
  return w.take();
}

void Sparsifier::step_device(const float*, DeviceStep&, comm::Communicator&, StepStats&) {
  throw InvalidArgument(
      detail::concat("sparsifier '", name(),
                     "' has no GPU path; on a device-resident gradient these run: "
                     "exdyna (controller paper or exact), dense"));
}

std::int64_t load_iteration_state(std::span<const std::byte> state, std::string_view sparsifier) {
  const std::string name(sparsifier);
  core::ByteReader r(state, name + " state");
  const auto t = r.get<std::int64_t>();
  r.expect_end();
  EXDYNA_CHECK_ARG(t >= 0 && t <= kMaxStateIteration, name, ": saved iteration ", t,
                   " is not valid; expected 0..", kMaxStateIteration);
  return t;
}

}  // namespace exdyna::sparsifiers
