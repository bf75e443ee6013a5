// A Communicator over a c10d::ProcessGroup that somebody else created and rendezvoused: the one a
// PyTorch user already has (torch.distributed's default group, or the group DDP uses), handed
// over from Python by the binding (python/bindings.cpp). No second rendezvous, no store
// of our own: every collective is a call on the group, so it shares the group's connections and its
// ordering with the user's own collectives.
//
//   all-reduce          ProcessGroup::allreduce (SUM), in place
//   allgather_counts    ProcessGroup::allgather of equal-size int64 tensors
//   padded all-gather   ProcessGroup::allgather of max(counts)-element byte tensors: the padding
//                       really travels, as the paper's padded all-gather
//   exact all-gather    one ProcessGroup::broadcast per rank with a non-empty list, each of that
//                       rank's true size: c10d's allgather insists on equal sizes, and a generic
//                       group offers no allgatherv, so n broadcasts move exactly the payload
//   broadcast, barrier  ProcessGroup::broadcast / barrier
//
// Every call waits with the communicator's timeout. After a failure the communicator refuses
// further calls (a collective may still be in flight on the group), naming the first failure.
// Host buffers become CPU tensors over the caller's memory (from_blob) for Gloo and MPI; over NCCL,
// which moves only device memory, they travel through a copy on the current CUDA device. Device
// buffers (allgather_list_device, allreduce_sum_device: the GPU path) become CUDA tensors over
// the caller's device memory, for NCCL or Gloo (which takes CUDA tensors); MPI refuses them.
//
// The class is public so the Gloo engine can build on it: in its c10d mode (the default) the Gloo
// engine is this communicator over its own ProcessGroupGloo, overriding only what it does
// differently (exact all-gather and 16-bit sum on the group's Gloo context, host buffers only, its
// name and post-mortem in errors).
//
// This header includes libtorch's c10d headers: only the Python binding, the engines' .cpp files
// and a C++ program that links exdyna::process_group (and so libtorch) include it.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

class ProcessGroupCommunicator : public Communicator {
 public:
  // Throws InvalidArgument when pg is null, its backend is not gloo, mpi or nccl, or timeout <= 0.
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> pg,
                           std::chrono::milliseconds timeout);

  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }
  std::string_view engine() const override { return "process-group"; }
  bool takes_device_buffers() const override { return backend_ != "mpi"; }

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
  void do_allgatherv_device(const void* mine, std::size_t elem_size,
                            std::span<const std::int64_t> counts, GatherMode mode,
                            void* out) override;
  void do_allreduce_f32_device(float* data, std::size_t n) override;
  void do_broadcast(std::span<std::byte> data, int root) override;
  void do_barrier() override;

  // Moves the padded all-gather's equal blocks: send (block bytes) from every rank into recv
  // (block * size() bytes, in rank order). The padding around it is the same on every path.
  virtual void gather_blocks(const std::byte* send, std::size_t block, std::byte* recv);

  // How errors name this communicator: failure_label() starts a failure's message,
  // refusal_label() the refusal of a call after one; failure_note() is appended to a failure's.
  virtual std::string failure_label() const { return "process group (" + backend_ + ")"; }
  virtual std::string refusal_label() const { return "process group"; }
  virtual std::string failure_note() { return {}; }

  // Every collective, whatever carries it, goes through begin() and, when it throws, fail(): one
  // numbering and one refusal after the first failure. begin() returns the call's number.
  std::uint64_t begin(const char* op);
  [[noreturn]] void fail(const char* op, const std::string& what);

  // Issues one collective on the group and waits for it with the communicator's timeout.
  template <typename Issue>
  void run(const char* op, Issue&& issue) {
    begin(op);
    try {
      auto work = issue();
      work->wait(timeout());
    } catch (const std::exception& e) {
      fail(op, e.what());
    }
  }

  // A collective on device buffers: over NCCL the caller's stream is ordered after it and the
  // host goes on (NCCL's wait with a timeout would block the host until the GPU finished every
  // kernel queued before it, which the resident step must not do); the group's own timeout
  // (NCCL's watchdog) then stands for ours. Other backends wait as run() does.
  template <typename Issue>
  void run_on_stream(const char* op, Issue&& issue) {
    if (!device_only_) return run(op, std::forward<Issue>(issue));
    begin(op);
    try {
      issue()->wait();
    } catch (const std::exception& e) {
      fail(op, e.what());
    }
  }

  // c10 errors carry a C++ stack trace after the first lines; keep the message only.
  static std::string first_line(const std::string& s);

 private:
  // The paper's padded all-gather: equal-size tensors of max(counts) elements really move.
  void padded_allgather(const void* mine, std::size_t elem_size,
                        std::span<const std::int64_t> counts, void* out);
  template <typename T>
  void allreduce(T* data, std::size_t n, at::ScalarType type);

  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  std::string backend_;
  std::uint64_t seq_ = 0;
  std::string failure_;
  std::vector<std::byte> send_, recv_;
  bool device_only_ = false;
  at::Tensor dev_send_, dev_recv_;  // the padded device all-gather's buffers, kept between steps
  std::vector<float> wide16_;       // 16-bit values widened where the backend has no 16-bit sum
};

// Throws InvalidArgument when pg is null or its backend is not gloo, mpi or nccl.
std::unique_ptr<Communicator> make_process_group_communicator(
    c10::intrusive_ptr<c10d::ProcessGroup> pg,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(300'000));

}  // namespace exdyna::comm
