#include "exdyna/comm/engines/process_group_communicator.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace exdyna::comm {

namespace {

at::Tensor bytes_tensor(const void* p, std::size_t n) {
  return at::from_blob(const_cast<void*>(p), {static_cast<std::int64_t>(n)}, at::kByte);
}

// A copy of a host tensor on the current CUDA device (for NCCL).
at::Tensor to_device(const at::Tensor& host) {
  return host.to(at::Device(at::kCUDA), /*non_blocking=*/false, /*copy=*/true);
}

// A tensor over n bytes of device memory at p (its device taken from the pointer).
at::Tensor device_bytes(const void* p, std::int64_t n) {
  return at::from_blob(const_cast<void*>(p), {n},
                       at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
}

}  // namespace

ProcessGroupCommunicator::ProcessGroupCommunicator(c10::intrusive_ptr<c10d::ProcessGroup> pg,
                                                   std::chrono::milliseconds timeout)
    : pg_(std::move(pg)) {
  EXDYNA_CHECK_ARG(pg_, "process_group is None; expected a torch.distributed process group");
  backend_ = pg_->getBackendName();
  EXDYNA_CHECK_ARG(backend_ == "gloo" || backend_ == "mpi" || backend_ == "nccl",
                   "process_group backend '", backend_,
                   "' is not supported; expected gloo, mpi or nccl");
  // NCCL moves only device memory: the host buffers (counts, ladders) travel through a device
  // copy (stage), and the gradient must be on the GPU.
  device_only_ = backend_ == "nccl";
  EXDYNA_CHECK_ARG(timeout.count() > 0, "timeout ", timeout.count(),
                   " ms is not valid; expected > 0");
  set_timeout(timeout);
}

void ProcessGroupCommunicator::do_allgatherv(const void* mine, std::size_t elem_size,
                                             std::span<const std::int64_t> counts, GatherMode mode,
                                             void* out) {
  if (mode == GatherMode::kPadded) {
    padded_allgather(mine, elem_size, counts, out);
    return;
  }
  // Exact: every rank with a non-empty list broadcasts exactly its bytes, in rank order.
  auto* dst = static_cast<std::byte*>(out);
  for (int r = 0; r < size(); ++r) {
    const auto b = static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]) * elem_size;
    if (b == 0) continue;  // every rank sees the same counts, so all skip together
    if (r == rank()) std::memcpy(dst, mine, b);
    std::vector<at::Tensor> t{bytes_tensor(dst, b)};
    c10d::BroadcastOptions o;
    o.rootRank = r;
    o.timeout = timeout();
    run("allgather_list (exact)", [&] { return pg_->broadcast(t, o); });
    dst += b;
  }
}

void ProcessGroupCommunicator::do_allgather_i64(std::span<const std::int64_t> mine,
                                                std::span<std::int64_t> out) {
  if (device_only_) {
    const auto m = static_cast<std::int64_t>(mine.size());
    auto in = to_device(at::from_blob(const_cast<std::int64_t*>(mine.data()), {m}, at::kLong));
    auto all = at::empty({m * size()}, in.options());
    std::vector<at::Tensor> ins{in};
    std::vector<std::vector<at::Tensor>> outs(1);
    for (int r = 0; r < size(); ++r) outs[0].push_back(all.narrow(0, r * m, m));
    c10d::AllgatherOptions o;
    o.timeout = timeout();
    run("allgather_counts", [&] { return pg_->allgather(outs, ins, o); });
    at::from_blob(out.data(), {m * size()}, at::kLong).copy_(all);
    return;
  }
  const auto m = static_cast<std::int64_t>(mine.size());
  std::vector<at::Tensor> in{at::from_blob(const_cast<std::int64_t*>(mine.data()), {m}, at::kLong)};
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int r = 0; r < size(); ++r)
    outs[0].push_back(at::from_blob(out.data() + static_cast<std::size_t>(r * m), {m}, at::kLong));
  c10d::AllgatherOptions o;
  o.timeout = timeout();
  run("allgather_counts", [&] { return pg_->allgather(outs, in, o); });
}

void ProcessGroupCommunicator::do_alltoall_i64(std::span<const std::int64_t> send,
                                               std::span<std::int64_t> recv) {
  const auto n = static_cast<std::int64_t>(send.size());
  auto in = at::from_blob(const_cast<std::int64_t*>(send.data()), {n}, at::kLong);
  auto out = at::from_blob(recv.data(), {n}, at::kLong);
  std::vector<std::int64_t> equal;  // empty: equal splits
  c10d::AllToAllOptions o;
  o.timeout = timeout();
  run("alltoall_counts", [&] { return pg_->alltoall_base(out, in, equal, equal, o); });
}

void ProcessGroupCommunicator::do_alltoallv(const void* send, std::size_t elem_size,
                                            std::span<const std::int64_t> send_counts,
                                            std::span<const std::int64_t> recv_counts, void* recv) {
  std::vector<std::int64_t> sb, rb;
  const std::int64_t st = byte_lengths(send_counts, elem_size, sb);
  const std::int64_t rt = byte_lengths(recv_counts, elem_size, rb);
  std::uint8_t dummy_in = 0, dummy_out = 0;  // empty buffers still need a valid address
  auto tin = at::from_blob(st ? const_cast<void*>(send) : &dummy_in, {st}, at::kByte);
  auto tout = at::from_blob(rt ? recv : &dummy_out, {rt}, at::kByte);
  c10d::AllToAllOptions o;
  o.timeout = timeout();
  run("alltoall_list", [&] { return pg_->alltoall_base(tout, tin, rb, sb, o); });
}

void ProcessGroupCommunicator::do_allreduce_f32(std::span<float> data) {
  allreduce(data.data(), data.size(), at::kFloat);
}
void ProcessGroupCommunicator::do_allreduce_f64(std::span<double> data) {
  allreduce(data.data(), data.size(), at::kDouble);
}
// c10d sums fp16 on Gloo and NCCL, and bf16 on NCCL (ProcessGroupGloo 1.13 has no kBFloat16 sum):
// there the words are all-reduced as they are, 2 bytes a value, as the Gloo engine does. Elsewhere
// the values travel widened to float32 (what an fp32 step sends; an all-gather of the words would
// send size() - 1 times 2 bytes a value), are summed there and rounded back once.
void ProcessGroupCommunicator::do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) {
  if (data.empty()) return;
  const bool half = f == core::ValueFormat::kFp16;
  if (backend_ == "nccl" || (half && backend_ == "gloo")) {
    allreduce(data.data(), data.size(), half ? at::kHalf : at::kBFloat16);
    return;
  }
  wide16_.resize(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) wide16_[i] = core::from_bits16(data[i], f);
  allreduce(wide16_.data(), wide16_.size(), at::kFloat);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = core::to_bits16(wide16_[i], f);
  add_allreduce_bytes(data.size_bytes());  // 4 bytes a value; allreduce_sum_16 counted 2
}

void ProcessGroupCommunicator::do_allgatherv_device(const void* mine, std::size_t elem_size,
                                                    std::span<const std::int64_t> counts,
                                                    GatherMode mode, void* out) {
  const auto n = static_cast<std::int64_t>(size());
  const auto es = static_cast<std::int64_t>(elem_size);
  if (mode == GatherMode::kExact) {
    // One broadcast per rank with a non-empty list, of its true size, into its place in out.
    std::int64_t at_byte = 0;
    for (int r = 0; r < size(); ++r) {
      const std::int64_t b = counts[static_cast<std::size_t>(r)] * es;
      if (b == 0) continue;
      auto dst = device_bytes(static_cast<std::byte*>(out) + at_byte, b);
      if (r == rank()) dst.copy_(device_bytes(mine, b));
      std::vector<at::Tensor> t{dst};
      c10d::BroadcastOptions o;
      o.rootRank = r;
      o.timeout = timeout();
      run_on_stream("allgather_list (exact, device)", [&] { return pg_->broadcast(t, o); });
      at_byte += b;
    }
    return;
  }
  // Padded: max(counts) elements from every rank really travel, then the padding is dropped.
  const std::int64_t block = *std::max_element(counts.begin(), counts.end()) * es;
  if (block == 0) return;
  const std::int64_t my = counts[static_cast<std::size_t>(rank())] * es;
  const auto opts = at::TensorOptions().dtype(at::kByte).device(at::kCUDA);
  if (!dev_send_.defined() || dev_send_.numel() < block) dev_send_ = at::empty({block}, opts);
  if (!dev_recv_.defined() || dev_recv_.numel() < block * n)
    dev_recv_ = at::empty({block * n}, opts);
  auto send = dev_send_.narrow(0, 0, block);
  if (my) send.narrow(0, 0, my).copy_(device_bytes(mine, my));
  if (my < block) send.narrow(0, my, block - my).zero_();
  std::vector<at::Tensor> in{send};
  std::vector<std::vector<at::Tensor>> outs(1);
  for (std::int64_t r = 0; r < n; ++r) outs[0].push_back(dev_recv_.narrow(0, r * block, block));
  c10d::AllgatherOptions o;
  o.timeout = timeout();
  run_on_stream("allgather_list (padded, device)", [&] { return pg_->allgather(outs, in, o); });
  std::int64_t at_byte = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t b = counts[static_cast<std::size_t>(r)] * es;
    if (b)
      device_bytes(static_cast<std::byte*>(out) + at_byte, b)
          .copy_(dev_recv_.narrow(0, r * block, b));
    at_byte += b;
  }
}

void ProcessGroupCommunicator::do_allreduce_f32_device(float* data, std::size_t n) {
  if (n == 0) return;
  std::vector<at::Tensor> t{at::from_blob(data, {static_cast<std::int64_t>(n)},
                                          at::TensorOptions().dtype(at::kFloat).device(at::kCUDA))};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  o.timeout = timeout();
  run_on_stream("allreduce_sum (device)", [&] { return pg_->allreduce(t, o); });
}

void ProcessGroupCommunicator::do_broadcast(std::span<std::byte> data, int root) {
  if (data.empty()) return;
  if (device_only_) {
    const auto host = bytes_tensor(data.data(), data.size());
    std::vector<at::Tensor> t{to_device(host)};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = timeout();
    run("broadcast", [&] { return pg_->broadcast(t, o); });
    host.copy_(t[0]);
    return;
  }
  std::vector<at::Tensor> t{bytes_tensor(data.data(), data.size())};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.timeout = timeout();
  run("broadcast", [&] { return pg_->broadcast(t, o); });
}

void ProcessGroupCommunicator::do_barrier() {
  c10d::BarrierOptions o;
  o.timeout = timeout();
  run("barrier", [&] { return pg_->barrier(o); });
}

// The paper's padded all-gather: equal-size tensors of max(counts) elements really move.
void ProcessGroupCommunicator::padded_allgather(const void* mine, std::size_t elem_size,
                                                std::span<const std::int64_t> counts, void* out) {
  const auto n = static_cast<std::size_t>(size());
  const auto my = static_cast<std::size_t>(counts[static_cast<std::size_t>(rank())]) * elem_size;
  const auto block =
      static_cast<std::size_t>(*std::max_element(counts.begin(), counts.end())) * elem_size;
  if (block == 0) return;
  send_.assign(block, std::byte{0});
  if (my) std::memcpy(send_.data(), mine, my);
  recv_.resize(block * n);
  gather_blocks(send_.data(), block, recv_.data());
  auto* dst = static_cast<std::byte*>(out);
  for (std::size_t r = 0; r < n; ++r) {
    const auto b = static_cast<std::size_t>(counts[r]) * elem_size;
    if (b) std::memcpy(dst, recv_.data() + r * block, b);
    dst += b;
  }
}

template <typename T>
void ProcessGroupCommunicator::allreduce(T* data, std::size_t n, at::ScalarType type) {
  if (n == 0) return;
  const auto host = at::from_blob(data, {static_cast<std::int64_t>(n)}, type);
  std::vector<at::Tensor> t{device_only_ ? to_device(host) : host};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  o.timeout = timeout();
  run("allreduce_sum", [&] { return pg_->allreduce(t, o); });
  if (device_only_) host.copy_(t[0]);
}

void ProcessGroupCommunicator::gather_blocks(const std::byte* send, std::size_t block,
                                             std::byte* recv) {
  std::vector<at::Tensor> in{bytes_tensor(send, block)};
  std::vector<std::vector<at::Tensor>> outs(1);
  for (std::size_t r = 0; r < static_cast<std::size_t>(size()); ++r)
    outs[0].push_back(bytes_tensor(recv + r * block, block));
  c10d::AllgatherOptions o;
  o.timeout = timeout();
  run("allgather_list (padded)", [&] { return pg_->allgather(outs, in, o); });
}

std::uint64_t ProcessGroupCommunicator::begin(const char* op) {
  if (!failure_.empty())
    throw CommError(detail::concat(refusal_label(), ": rank ", rank(), ": ", op,
                                   " called after an earlier failure: ", failure_));
  return ++seq_;
}

void ProcessGroupCommunicator::fail(const char* op, const std::string& what) {
  const std::string msg = first_line(what);
  const bool timed_out = msg.find("imed out") != std::string::npos;
  failure_ =
      detail::concat(failure_label(), ": rank ", rank(), ": ", op, " (collective #", seq_, ") ",
                     timed_out ? "timed out after " : "failed: ",
                     timed_out ? detail::concat(timeout().count() / 1000.0, " s (", msg, ")") : msg,
                     failure_note());
  if (timed_out) throw TimeoutError(failure_);
  throw CommError(failure_);
}

std::string ProcessGroupCommunicator::first_line(const std::string& s) {
  const auto pos = s.find("\nException raised from");
  std::string m = pos == std::string::npos ? s : s.substr(0, pos);
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

std::unique_ptr<Communicator> make_process_group_communicator(
    c10::intrusive_ptr<c10d::ProcessGroup> pg, std::chrono::milliseconds timeout) {
  return std::make_unique<ProcessGroupCommunicator>(std::move(pg), timeout);
}

}  // namespace exdyna::comm
