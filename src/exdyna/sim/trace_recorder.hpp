// Records a trace (the format of trace_format.hpp) from a running data-parallel job: every rank
// writes its own gradients straight into one shared grads.f32, so the ranks exchange no gradient
// data, and each recorded step costs one pwrite per rank.
//
// Protocol; the constructor and finish() are collective (same order on every rank):
//   constructor  rank 0 makes sure dir is new or empty (prepare_trace_dir: an existing trace is
//                never overwritten), creates it and an empty grads.f32; rank 0's verdict is
//                broadcast, then every rank opens grads.f32 and all agree that they could.
//   record()     local, no communication: the first `steps` calls write call t's gradient at byte
//                ((t * W + rank) * n_g) * 4; later calls return at once.
//   finish()     every rank syncs its writes, all-gathers (n_g, recorded) so the ranks check that
//                they agree, then rank 0 sets grads.f32 to exactly T*W*n_g*4 bytes and writes
//                meta.json last, atomically (temporary file + rename).
// A job that dies before finish() leaves a directory without meta.json, which TraceSource refuses.
// grads.f32 lives in one directory that every rank must reach (one machine, or a shared file
// system); a rank that cannot open it makes every rank fail in the constructor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sim/trace_format.hpp"

namespace exdyna::sim {

// Makes dir ready for a new trace: creates it (and its parents) when missing; refuses a path that
// is not a directory or a directory that holds anything (InvalidArgument naming the path and an
// entry), so a recording never overwrites an earlier trace.
void prepare_trace_dir(const std::filesystem::path& dir);

class TraceRecorder {
 public:
  static constexpr std::int64_t kDefaultSteps = 100;

  // Collective. steps: how many record() calls per rank are written (0: all of them).
  TraceRecorder(const std::filesystem::path& dir, std::int64_t steps, comm::Communicator& comm);
  ~TraceRecorder();  // closes grads.f32; never writes meta.json
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Whether the next record() call still writes.
  bool wants_more() const { return steps_ == 0 || recorded_ < steps_; }
  // Writes this rank's gradient of the next iteration (if wants_more()). Every call must pass the
  // same number of elements, n_g. Thread-safe across recorders of different ranks (pwrite).
  void record(std::span<const float> grad);
  std::int64_t recorded() const { return recorded_; }

  // Collective. Completes the trace with the iterations every rank recorded and returns its
  // meta.json. Throws (and writes no meta.json) when nothing was recorded or the ranks disagree.
  TraceMeta finish();

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::int64_t steps_;
  comm::Communicator& comm_;
  int fd_ = -1;
  std::int64_t n_g_ = 0;  // fixed by the first record()
  std::int64_t recorded_ = 0;
};

}  // namespace exdyna::sim
