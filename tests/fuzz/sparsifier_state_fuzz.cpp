// Sparsifier::load_state of every registered sparsifier (input layout: sparsifier_state_fuzz.hpp).
// A state that loads must leave a sparsifier that can step and save again: one step on a one-rank
// group follows every successful load.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "fuzz_support.hpp"
#include "sparsifier_state_fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  static const auto registry = sparsifiers::builtin_registry();
  static comm::LocalGroup group(1);
  static const auto comm = group.communicator(0);
  const std::string_view in = fuzz::as_text(data, size);
  const auto cut = in.find('\0');
  if (cut == std::string_view::npos || cut + 2 > size) return 0;
  const std::string name(in.substr(0, cut));
  static const auto names = registry.names();
  if (std::find(names.begin(), names.end(), name) == names.end()) return 0;
  const int controller = data[cut + 1] % fuzz::kStateFuzzControllers;
  auto sp = registry.make(name, fuzz::state_fuzz_config(controller));
  data += cut + 2;
  size -= cut + 2;
  const auto state = std::as_bytes(std::span(data, size));
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
