// A rank's tape: the results of its collectives, in call order. TapeRecorder records them while
// the rank runs in its group, over any engine; TapePlayer serves them back to the same rank
// running alone, with no peers, so one worker's steps can be re-run exactly and measured on an
// otherwise idle machine, as they run with one machine per worker (`exdyna bench select`'s solo
// measurement: W worker threads on this machine's two cores evict each other's caches between
// the selection and the cut, which a deployment does not do).
//
// A player checks every call against the tape (the same collective, the same result size) and
// throws DataError naming the call where the replayed rank diverges, rather than serve it data
// recorded for another call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::sim {

using comm::Communicator;
using comm::GatherMode;

struct Tape {
  enum class Op : std::uint8_t {
    kAllgatherList,
    kAllgatherCounts,
    kAlltoallCounts,
    kAlltoallList,
    kAllreduceF32,
    kAllreduceF64,
    kAllreduce16,
    kBroadcast,
    kBarrier,
  };
  struct Entry {
    Op op;
    std::vector<std::byte> result;  // what the collective wrote into the caller's buffer
  };
  int rank = 0;
  int size = 0;
  std::vector<Entry> entries;
  // The recorder keeps at most `limit` bytes of results; past it, it drops the entries and sets
  // `overflowed` (and records nothing more), so a long run cannot exhaust memory through its tape.
  std::size_t limit = std::numeric_limits<std::size_t>::max();
  std::size_t bytes = 0;  // of results held
  bool overflowed = false;
};
const char* to_string(Tape::Op op);

// Forwards every collective to `inner` (through its public calls, so it counts bytes as always)
// and appends its result to `tape` (cleared first; its limit kept). Both must outlive the
// recorder; use from the rank's thread.
class TapeRecorder final : public Communicator {
 public:
  TapeRecorder(Communicator& inner, Tape& tape);
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view engine() const override { return inner_.engine(); }

 protected:
  void do_allgatherv(const void* mine, std::size_t elem_size, std::span<const std::int64_t> counts,
                     GatherMode mode, void* out) override;
  void do_allgather_i64(std::span<const std::int64_t> mine, std::span<std::int64_t> out) override;
  void do_alltoall_i64(std::span<const std::int64_t> send, std::span<std::int64_t> recv) override;
  void do_alltoallv(const void* send, std::size_t elem_size,
                    std::span<const std::int64_t> send_counts,
                    std::span<const std::int64_t> recv_counts, void* recv) override;
  void do_allreduce_f32(std::span<float> data) override;
  void do_allreduce_f64(std::span<double> data) override;
  void do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) override;
  void do_broadcast(std::span<std::byte> data, int root) override;
  void do_barrier() override;

 private:
  void record(Tape::Op op, const void* result, std::size_t bytes);
  Communicator& inner_;
  Tape& tape_;
  // Reused by every call, so recording allocates nothing per step once they have grown.
  std::vector<std::byte> bytes_scratch_;
  std::vector<std::int64_t> counts_scratch_, recv_counts_scratch_, i64_scratch_;
  std::vector<float> f32_scratch_;
};

// Rank tape.rank of a group of tape.size, alone: each collective returns the next result on the
// tape. The tape must outlive the player; an overflowed tape is refused (InvalidArgument).
class TapePlayer final : public Communicator {
 public:
  explicit TapePlayer(const Tape& tape);
  int rank() const override { return tape_.rank; }
  int size() const override { return tape_.size; }
  std::string_view engine() const override { return "tape"; }
  // Whether every entry has been served (a replay that stops early ran fewer steps).
  bool finished() const { return next_ == tape_.entries.size(); }

 protected:
  void do_allgatherv(const void* mine, std::size_t elem_size, std::span<const std::int64_t> counts,
                     GatherMode mode, void* out) override;
  void do_allgather_i64(std::span<const std::int64_t> mine, std::span<std::int64_t> out) override;
  void do_alltoall_i64(std::span<const std::int64_t> send, std::span<std::int64_t> recv) override;
  void do_alltoallv(const void* send, std::size_t elem_size,
                    std::span<const std::int64_t> send_counts,
                    std::span<const std::int64_t> recv_counts, void* recv) override;
  void do_allreduce_f32(std::span<float> data) override;
  void do_allreduce_f64(std::span<double> data) override;
  void do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) override;
  void do_broadcast(std::span<std::byte> data, int root) override;
  void do_barrier() override;

 private:
  // Copies the next entry into out after checking that it is `op` with `bytes` of result.
  void play(Tape::Op op, void* out, std::size_t bytes);
  // Checks that what this rank sends in the last call played is what it sent when recorded
  // (its own slice of an all-gather's result), so a diverged replay fails at once.
  void check_own(const void* mine, const void* at, std::size_t bytes) const;
  const Tape& tape_;
  std::size_t next_ = 0;
};

}  // namespace exdyna::sim
