// The startup check: before any work, ranks exchange a fingerprint of their configuration and
// refuse to start when they disagree, naming the differing field and the ranks. A mismatch found
// later (a different density on one rank, another exdyna version) would show up as a hang or as
// silently wrong results; found here it is one clear message on every rank.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

class Fingerprint {
 public:
  // Adds one field. A value of the form "a=1;b=2" (Sparsifier::fingerprint(),
  // SparsifierConfig::fingerprint()) is split into sub-fields "name.a", "name.b", so a mismatch
  // names the option rather than the whole string.
  Fingerprint& add(const std::string& name, const std::string& value);
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }
  std::string serialize() const;
  static Fingerprint parse(const std::string& s);

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// Collective (all ranks call it, first thing after building the communicator): all-gathers the
// serialised fingerprints (lengths, then the bytes, exact mode) and compares them field by field.
// Throws InvalidArgument on every rank when they differ, e.g.
//   "configuration differs between ranks: density is '0.01' on ranks 0,1,3 but '0.02' on rank 2".
// The check's own traffic is not counted: the byte counters are reset afterwards.
void check_same_configuration(Communicator& comm, const Fingerprint& fp);

}  // namespace exdyna::comm
