// The built-in sparsifiers, registered explicitly.
#include "exdyna/sparsifiers/dense.hpp"
#include "exdyna/sparsifiers/registry.hpp"

namespace exdyna::sparsifiers {

void register_builtin_sparsifiers(Registry& r) {
  r.add("dense", "plain all-reduce of the whole gradient (the reference)",
        [](const SparsifierConfig& c) { return std::make_unique<Dense>(c); });
}

}  // namespace exdyna::sparsifiers
