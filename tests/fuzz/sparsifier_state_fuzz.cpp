// Sparsifier::load_state of every registered sparsifier: the first input byte picks the
// sparsifier (by index in the registry's sorted names) and exdyna's controller, the rest is the
// state. A state that
// loads must leave a sparsifier that can step and save again: one step on a one-rank group
// follows every successful load.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "fuzz_support.hpp"
#include "sparsifier_state_fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  if (size == 0) return 0;
  static const auto registry = sparsifiers::builtin_registry();
  static const auto names = registry.names();
  static comm::LocalGroup group(1);
  static const auto comm = group.communicator(0);
  const auto& name = names[data[0] % names.size()];
  const int controller = data[0] / names.size() % fuzz::kStateFuzzControllers;
  auto sp = registry.make(name, fuzz::state_fuzz_config(controller));
  const auto state = std::as_bytes(std::span(data + 1, size - 1));
  try {
    sp->load_state(state);
  } catch (const Error&) {
    return 0;
  }
  const auto acc = fuzz::state_fuzz_gradient(7);
  sparsifiers::SparseResult out;
  sparsifiers::StepStats stats;
  fuzz::refuse_only_with_our_errors([&] { sp->step(acc, *comm, out, stats); });
  (void)sp->save_state();
  return 0;
}
