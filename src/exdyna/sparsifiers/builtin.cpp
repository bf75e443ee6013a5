// The built-in sparsifiers, registered explicitly.
#include "exdyna/sparsifiers/cltk.hpp"
#include "exdyna/sparsifiers/dense.hpp"
#include "exdyna/sparsifiers/dgc.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna.hpp"
#include "exdyna/sparsifiers/gaussiank.hpp"
#include "exdyna/sparsifiers/hard_threshold.hpp"
#include "exdyna/sparsifiers/oktopk.hpp"
#include "exdyna/sparsifiers/randomk.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/sparsifiers/sidco.hpp"
#include "exdyna/sparsifiers/topk.hpp"

namespace exdyna::sparsifiers {

void register_builtin_sparsifiers(Registry& r) {
  r.add("dense", "plain all-reduce of the whole gradient (the reference)",
        [](const SparsifierConfig& c) { return std::make_unique<Dense>(c); });
  r.add("topk", "each worker's exact top-k of its whole gradient; union of the lists (build-up)",
        [](const SparsifierConfig& c) { return std::make_unique<TopK>(c); });
  r.add("cltk", "cyclic local top-k (ScaleCom): the leader t mod n selects and broadcasts",
        [](const SparsifierConfig& c) { return std::make_unique<CltK>(c); });
  r.add("hard-threshold", "a fixed threshold (default 1/(2 sqrt(k))) over the whole gradient",
        [](const SparsifierConfig& c) { return std::make_unique<HardThreshold>(c); });
  r.add("sidco", "SIDCo: multi-stage exponential fit of the threshold over the whole gradient",
        [](const SparsifierConfig& c) { return std::make_unique<Sidco>(c); });
  r.add("gaussiank",
        "Gaussian-k: threshold from a Gaussian fit of the whole gradient, corrected by counting",
        [](const SparsifierConfig& c) { return std::make_unique<GaussianK>(c); });
  r.add("randomk", "Random-k: the same k uniformly drawn indices on every rank (seed + iteration)",
        [](const SparsifierConfig& c) { return std::make_unique<RandomK>(c); });
  r.add("dgc", "DGC: top-k threshold from a random sample, refined by a top-k of what passed",
        [](const SparsifierConfig& c) { return std::make_unique<Dgc>(c); });
  r.add("oktopk",
        "Ok-Topk: reused thresholds, balanced regions, sparse reduce-scatter + all-gather (< 6k)",
        [](const SparsifierConfig& c) { return std::make_unique<OkTopk>(c); });
  r.add("exdyna",
        "ExDyna: exclusive dynamic partitions with online threshold scaling (paper Alg. 1-5)",
        [](const SparsifierConfig& c) { return std::make_unique<ExDyna>(c); });
}

}  // namespace exdyna::sparsifiers
