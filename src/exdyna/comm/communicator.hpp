// The Communicator interface: exactly the collectives the sparsifiers need, with byte counters and
// a timeout on every blocking call. Engines (in-process group, MPI, Gloo) implement the protected
// do_* hooks; the public wrappers validate arguments and count bytes identically for every engine.
//
// Collectives must be called in the same order on every rank.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exdyna/comm/byte_counts.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/half_float.hpp"
#include "exdyna/core/timer.hpp"

namespace exdyna::comm {

// How variable-length lists are all-gathered.
enum class GatherMode {
  kPadded,  // every rank sends max_r count_r elements (the paper's padded all-gather)
  kExact,   // every rank sends exactly its own count (MPI_Allgatherv); no padding
};
const char* to_string(GatherMode m);
GatherMode parse_gather_mode(std::string_view s);  // "padded" | "exact"

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view engine() const = 0;  // "local", "mpi", "gloo"

  // All-gather of a fixed number of int64 per rank: out[r * mine.size() + j] = mine_r[j].
  void allgather_counts(std::span<const std::int64_t> mine, std::span<std::int64_t> out);
  // The same collective for a slot whose first count_words words are counts and the rest a padded
  // list (ExDyna's fused all-gather, sparsifiers/exdyna/fused_gather.hpp): bytes are counted as
  // allgather_counts and allgather_indices, one collective call.
  void allgather_fused(std::span<const std::int64_t> mine, std::size_t count_words,
                       std::span<std::int64_t> out);

  // All-gather of variable-length lists. counts[r] is the number of elements rank r contributes
  // (every rank already knows them, from allgather_counts); mine.size() must equal counts[rank()].
  // out receives the lists concatenated in rank order, without padding, in both modes.
  template <typename T>
  void allgather_list(std::span<const T> mine, std::span<const std::int64_t> counts,
                      GatherMode mode, std::vector<T>& out);

  // All-to-all of variable-length lists (Ok-Topk's sparse reduce-scatter and its balancing).
  // send holds the lists for ranks 0 .. size()-1 one after another, send_counts[j] elements for
  // rank j. On return recv holds the lists every rank sent to this one, concatenated in rank
  // order, and recv_counts[j] the number of elements rank j sent. Two collectives: an all-to-all of
  // the counts (one int64 per rank, counted in allgather_counts as size() * 8 bytes), then of the
  // lists (counted in alltoall: the elements this rank sends to the OTHER ranks; its own list
  // does not travel).
  template <typename T>
  void alltoall_list(std::span<const T> send, std::span<const std::int64_t> send_counts,
                     std::vector<T>& recv, std::vector<std::int64_t>& recv_counts);
  // The same when every rank already knows what it receives (recv_counts[j] from rank j, e.g.
  // computed from all-gathered counts): one collective, the lists'. Ranks must agree: rank j's
  // send_counts[i] equal to rank i's recv_counts[j].
  template <typename T>
  void alltoall_list_known(std::span<const T> send, std::span<const std::int64_t> send_counts,
                           std::span<const std::int64_t> recv_counts, std::vector<T>& recv);

  // In-place sum over ranks.
  void allreduce_sum(std::span<float> data);
  void allreduce_sum(std::span<double> data);

  // In-place sum over ranks of values sent as 16-bit words (--values fp16|bf16). Every element
  // of data must already be representable in f (sparsifiers round before they send, so error
  // feedback keeps the rounding error); it travels as 2 bytes and is counted so. The partial sums
  // are rounded to f as they are formed (each engine's reduction adds two 16-bit values in float32
  // and rounds back), so the result is representable in f too and identical on every rank; its
  // value depends on the engine's reduction order, like the float32 all-reduce. That rounding of
  // partial sums is not fed back into any residual. f = kFp32 is refused (use allreduce_sum).
  void allreduce_sum_16(std::span<float> data, core::ValueFormat f);

  // Copies root's buffer into every rank's buffer.
  void broadcast(std::span<std::byte> data, int root);
  template <typename T>
  void broadcast_values(std::span<T> data, int root) {
    broadcast(std::as_writable_bytes(data), root);
  }

  void barrier();

  // The same collectives on buffers in CUDA device memory, for the engines over a group that takes
  // them (the process-group engine over NCCL, or over Gloo with CUDA tensors): the GPU path's
  // indices and values never cross to the host. counts stay on the host, as every rank knows them.
  // Bytes are counted as allgather_list and allreduce_sum count them. The other engines refuse.
  virtual bool takes_device_buffers() const { return false; }
  void allgather_list_device(const void* mine, std::size_t elem_size,
                             std::span<const std::int64_t> counts, GatherMode mode, void* out);
  void allreduce_sum_device(float* data, std::size_t n);

  // Engines with a choice of algorithm (Gloo) run a collective whose result is smaller than these
  // byte counts with an algorithm of log2 W rounds (bcube all-reduce, Bruck all-gather) and a
  // larger one with the ring (W - 1 rounds or more, each message smaller). The others have no
  // choice: algorithm_switch() is empty and set_algorithm_switch() refused.
  struct AlgorithmSwitch {
    std::int64_t allreduce_below = 0;  // bytes of the reduced vector; 0: always the ring
    std::int64_t allgather_below = 0;  // bytes of the gathered result (every rank's part)
    // "A,G": EXDYNA_GLOO_LOG_BELOW's value that sets this switch (gloo_algorithm_switch.hpp).
    std::string setting() const {
      return std::to_string(allreduce_below) + "," + std::to_string(allgather_below);
    }
  };
  virtual std::optional<AlgorithmSwitch> algorithm_switch() const { return std::nullopt; }
  virtual void set_algorithm_switch(const AlgorithmSwitch& s);

  // Logical payload of collectives since construction or reset_bytes() (see ByteCounts).
  const ByteCounts& bytes() const { return bytes_; }
  void reset_bytes() { bytes_ = {}; }

  // CPU seconds the calling thread spent inside collectives since construction (copies,
  // reductions, the engine's own work on this thread; not the time it waited). A step's CPU time
  // minus this is its non-communication work, which the network's emulation must not count twice.
  double cpu_seconds() const { return cpu_s_; }

  // Every blocking call throws TimeoutError after this long. Default 300 s.
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }

 protected:
  // Meters one collective call: counts it (ByteCounts::collectives) and adds the calling
  // thread's CPU time between construction and destruction to cpu_seconds().
  class CpuMeter {
   public:
    explicit CpuMeter(Communicator& c) : c_(c), t0_(core::thread_cpu_seconds()) {
      ++c.bytes_.collectives;
    }
    ~CpuMeter() { c_.cpu_s_ += core::thread_cpu_seconds() - t0_; }
    CpuMeter(const CpuMeter&) = delete;
    CpuMeter& operator=(const CpuMeter&) = delete;

   private:
    Communicator& c_;
    double t0_;
  };

  // out has room for sum(counts) * elem_size bytes. In padded mode the engine must move
  // max(counts) * elem_size bytes per rank and strip the padding when writing out.
  virtual void do_allgatherv(const void* mine, std::size_t elem_size,
                             std::span<const std::int64_t> counts, GatherMode mode, void* out) = 0;
  virtual void do_allgather_i64(std::span<const std::int64_t> mine,
                                std::span<std::int64_t> out) = 0;
  // send[j] goes to rank j, recv[j] comes from rank j (one int64 each).
  virtual void do_alltoall_i64(std::span<const std::int64_t> send,
                               std::span<std::int64_t> recv) = 0;
  // send: send_counts[j] elements of elem_size bytes for rank j, in rank order; recv has room for
  // sum(recv_counts) elements and receives recv_counts[j] elements from rank j, in rank order.
  virtual void do_alltoallv(const void* send, std::size_t elem_size,
                            std::span<const std::int64_t> send_counts,
                            std::span<const std::int64_t> recv_counts, void* recv) = 0;
  virtual void do_allreduce_f32(std::span<float> data) = 0;
  virtual void do_allreduce_f64(std::span<double> data) = 0;
  // data holds the 16-bit words of format f; on return, their sum (see allreduce_sum_16). Every
  // engine overrides it with a reduction that moves the 16-bit words themselves.
  virtual void do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) = 0;
  virtual void do_broadcast(std::span<std::byte> data, int root) = 0;
  // Byte lengths per rank of an all-to-all's lists (counts[j] * elem_size), for the engines that
  // move bytes; returns their sum.
  static std::int64_t byte_lengths(std::span<const std::int64_t> counts, std::size_t elem_size,
                                   std::vector<std::int64_t>& out);
  // For an engine whose collective moves more than the logical payload (a 16-bit sum done as an
  // all-gather), so the counts stay honest.
  void add_allreduce_bytes(std::uint64_t b) { bytes_.allreduce += b; }
  virtual void do_barrier() = 0;
  // Device buffers (see allgather_list_device); the defaults refuse, naming the engine.
  virtual void do_allgatherv_device(const void* mine, std::size_t elem_size,
                                    std::span<const std::int64_t> counts, GatherMode mode,
                                    void* out);
  virtual void do_allreduce_f32_device(float* data, std::size_t n);

 private:
  void count_allgatherv(std::size_t elem_size, std::span<const std::int64_t> counts,
                        GatherMode mode, std::size_t mine);
  // Checks send_counts, exchanges them into recv_counts and counts the bytes; returns the
  // number of elements this rank receives.
  std::int64_t exchange_alltoall_counts(std::size_t elem_size, std::size_t send_size,
                                        std::span<const std::int64_t> send_counts,
                                        std::vector<std::int64_t>& recv_counts);
  // Checks both count lists and counts the bytes; returns the number of elements received.
  std::int64_t count_alltoall(std::size_t elem_size, std::size_t send_size,
                              std::span<const std::int64_t> send_counts,
                              std::span<const std::int64_t> recv_counts);
  ByteCounts bytes_;
  double cpu_s_ = 0;
  std::vector<std::uint16_t> wire16_;
  std::chrono::milliseconds timeout_{300'000};
};

template <typename T>
void Communicator::allgather_list(std::span<const T> mine, std::span<const std::int64_t> counts,
                                  GatherMode mode, std::vector<T>& out) {
  static_assert(std::is_trivially_copyable_v<T>);
  count_allgatherv(sizeof(T), counts, mode, mine.size());
  std::int64_t total = 0;
  for (auto c : counts) total += c;
  out.resize(static_cast<std::size_t>(total));
  const CpuMeter meter(*this);
  do_allgatherv(mine.data(), sizeof(T), counts, mode, out.data());
}

template <typename T>
void Communicator::alltoall_list(std::span<const T> send, std::span<const std::int64_t> send_counts,
                                 std::vector<T>& recv, std::vector<std::int64_t>& recv_counts) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto total = exchange_alltoall_counts(sizeof(T), send.size(), send_counts, recv_counts);
  recv.resize(static_cast<std::size_t>(total));
  const CpuMeter meter(*this);
  do_alltoallv(send.data(), sizeof(T), send_counts, recv_counts, recv.data());
}

template <typename T>
void Communicator::alltoall_list_known(std::span<const T> send,
                                       std::span<const std::int64_t> send_counts,
                                       std::span<const std::int64_t> recv_counts,
                                       std::vector<T>& recv) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto total = count_alltoall(sizeof(T), send.size(), send_counts, recv_counts);
  recv.resize(static_cast<std::size_t>(total));
  const CpuMeter meter(*this);
  do_alltoallv(send.data(), sizeof(T), send_counts, recv_counts, recv.data());
}

}  // namespace exdyna::comm
