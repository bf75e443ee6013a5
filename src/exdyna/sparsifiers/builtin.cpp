// The built-in sparsifiers, registered explicitly.
#include "exdyna/sparsifiers/cltk.hpp"
#include "exdyna/sparsifiers/dense.hpp"
#include "exdyna/sparsifiers/exdyna.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/sparsifiers/topk.hpp"

namespace exdyna::sparsifiers {

void register_builtin_sparsifiers(Registry& r) {
  r.add("dense", "plain all-reduce of the whole gradient (the reference)",
        [](const SparsifierConfig& c) { return std::make_unique<Dense>(c); });
  r.add("topk", "each worker's exact top-k of its whole gradient; union of the lists (build-up)",
        [](const SparsifierConfig& c) { return std::make_unique<TopK>(c); });
  r.add("cltk", "cyclic local top-k (ScaleCom): the leader t mod n selects and broadcasts",
        [](const SparsifierConfig& c) { return std::make_unique<CltK>(c); });
  r.add("exdyna", "ExDyna: exclusive dynamic partitions with online threshold scaling (paper Alg. 1-5)",
        [](const SparsifierConfig& c) { return std::make_unique<ExDyna>(c); });
}

}  // namespace exdyna::sparsifiers
