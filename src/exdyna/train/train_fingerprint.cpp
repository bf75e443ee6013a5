#include "exdyna/train/train_fingerprint.hpp"

#include <string>

namespace exdyna::train {

comm::Fingerprint train_fingerprint(const TrainOptions& o) {
  comm::Fingerprint fp;
  fp.add("model", o.model).add("dataset", o.dataset).add("sparsifier", o.sparsifier);
  fp.add("config", o.sparse.fingerprint());
  fp.add("batch_size", std::to_string(o.batch_size)).add("seed", std::to_string(o.seed));
  return fp;
}

std::string checkpoint_fingerprint(const TrainOptions& o, std::int64_t n_g) {
  return train_fingerprint(o).add("n_g", std::to_string(n_g)).serialize();
}

}  // namespace exdyna::train
