// In-process group: one thread per rank, shared memory. For simulation and for checking a setup on
// one machine, alongside the real engines (MPI, Gloo), never instead of them.
//
// Every collective is two rendezvous: ranks publish a pointer to their buffer, meet, read the
// others' buffers directly, and meet again before anyone returns (so buffers stay valid). Sums
// are taken in rank order, so every rank gets bit-identical results.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

class LocalGroup {
 public:
  explicit LocalGroup(int size);
  ~LocalGroup();
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int size() const;
  // The communicator of one rank; use it from that rank's thread only. Lives as long as the group.
  std::unique_ptr<Communicator> communicator(int rank);
  // Wakes every rank blocked in a collective, now and later, with a CommError naming the reason.
  void abort(const std::string& reason);

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

// Runs fn(comm) on `size` threads over one LocalGroup. If a rank throws, the group is aborted so
// the others never hang, all threads are joined, and the first exception is rethrown.
void run_local(int size, const std::function<void(Communicator&)>& fn,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(300'000));

}  // namespace exdyna::comm
