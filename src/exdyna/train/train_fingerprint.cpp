#include "exdyna/train/train_fingerprint.hpp"

#include <sstream>
#include <string>

namespace exdyna::train {

comm::Fingerprint train_fingerprint(const TrainOptions& o) {
  comm::Fingerprint fp;
  fp.add("model", o.model).add("dataset", o.dataset).add("sparsifier", o.sparsifier);
  fp.add("config", o.sparse.fingerprint());
  fp.add("batch_size", std::to_string(o.batch_size)).add("seed", std::to_string(o.seed));
  // Only a DGC warm-up is named, so runs and checkpoints without one keep their fingerprints.
  if (o.dgc_warmup_epochs > 0) {
    std::ostringstream w;
    w.precision(17);
    w << "epochs=" << o.dgc_warmup_epochs << ";start=" << o.dgc_warmup_start;
    fp.add("dgc_warmup", w.str());
  }
  return fp;
}

std::string checkpoint_fingerprint(const TrainOptions& o, std::int64_t n_g) {
  return train_fingerprint(o).add("n_g", std::to_string(n_g)).serialize();
}

}  // namespace exdyna::train
