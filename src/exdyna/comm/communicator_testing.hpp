// What an engine tells `bench comm` and the tests of the Gloo algorithm switch about the
// collective it just ran. Not installed: a diagnostic of this project's own tools, not part of the
// Communicator interface a user programs against (exdyna/exdyna.hpp).
#pragma once

#include <string_view>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

// Implemented, beside Communicator, by the engines with a choice of algorithm (Gloo).
class AlgorithmReport {
 public:
  // The algorithm of the last all-reduce or all-gather: "ring", "bcube" or "bruck".
  virtual std::string_view last_algorithm() const = 0;

 protected:
  ~AlgorithmReport() = default;
};

// The algorithm of c's last all-reduce or all-gather; the engine's name where it has no choice.
inline std::string_view last_algorithm(const Communicator& c) {
  const auto* report = dynamic_cast<const AlgorithmReport*>(&c);
  return report != nullptr ? report->last_algorithm() : c.engine();
}

}  // namespace exdyna::comm
