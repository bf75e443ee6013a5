#include "exdyna/comm/communicator.hpp"

#include <algorithm>

#include "exdyna/core/enum_names.hpp"

namespace exdyna::comm {

namespace {
constexpr core::EnumNames<GatherMode, 2> kGatherModeNames{
    {{GatherMode::kPadded, "padded"}, {GatherMode::kExact, "exact"}}};
}  // namespace

const char* to_string(GatherMode m) {
  return core::enum_to_string(kGatherModeNames, m);
}

GatherMode parse_gather_mode(std::string_view s) {
  return core::enum_parse(kGatherModeNames, "gather mode", s);
}

void Communicator::allgather_counts(std::span<const std::int64_t> mine,
                                    std::span<std::int64_t> out) {
  EXDYNA_CHECK_ARG(out.size() == mine.size() * static_cast<std::size_t>(size()),
                   "allgather_counts: output has ", out.size(), " elements, expected ",
                   mine.size() * static_cast<std::size_t>(size()));
  bytes_.allgather_counts += out.size() * sizeof(std::int64_t);
  const CpuMeter meter(*this);
  do_allgather_i64(mine, out);
}

void Communicator::allgather_fused(std::span<const std::int64_t> mine, std::size_t count_words,
                                   std::span<std::int64_t> out) {
  const std::size_t n = static_cast<std::size_t>(size());
  EXDYNA_CHECK_ARG(out.size() == mine.size() * n && count_words <= mine.size(),
                   "allgather_fused: output has ", out.size(), " elements and ", count_words,
                   " count words of ", mine.size(), "; expected ", mine.size() * n,
                   " and at most all");
  bytes_.allgather_counts += n * count_words * sizeof(std::int64_t);
  bytes_.allgather_indices += n * (mine.size() - count_words) * sizeof(std::int64_t);
  const CpuMeter meter(*this);
  do_allgather_i64(mine, out);
}

void Communicator::count_allgatherv(std::size_t elem_size, std::span<const std::int64_t> counts,
                                    GatherMode mode, std::size_t mine) {
  EXDYNA_CHECK_ARG(counts.size() == static_cast<std::size_t>(size()),
                   "allgather_list: ", counts.size(), " counts given, expected one per rank (",
                   size(), ")");
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(mine) == counts[static_cast<std::size_t>(rank())],
                   "allgather_list: rank ", rank(), " sends ", mine, " elements but counts says ",
                   counts[static_cast<std::size_t>(rank())]);
  std::int64_t total = 0, m = 0;
  for (auto c : counts) {
    EXDYNA_CHECK_ARG(c >= 0, "allgather_list: negative count ", c);
    total += c;
    m = std::max(m, c);
  }
  if (mode == GatherMode::kPadded) {
    const auto padded = static_cast<std::uint64_t>(m) * counts.size();
    bytes_.allgather_indices += padded * elem_size;
    bytes_.padded_elements += padded - static_cast<std::uint64_t>(total);
  } else {
    bytes_.allgather_indices += static_cast<std::uint64_t>(total) * elem_size;
  }
}

namespace {
// Sum of counts, checking that each is in 0 .. 2^40: a peer's corrupt or hostile count must not
// become an allocation.
std::int64_t checked_total(std::span<const std::int64_t> counts, const char* what) {
  std::int64_t total = 0;
  for (std::size_t j = 0; j < counts.size(); ++j) {
    if (counts[j] < 0 || counts[j] > (std::int64_t{1} << 40))
      throw InvalidArgument(detail::concat("alltoall_list: ", what, " ", counts[j], " for rank ", j,
                                           " is not valid; expected 0 .. 2^40"));
    total += counts[j];
  }
  return total;
}
}  // namespace

std::int64_t Communicator::exchange_alltoall_counts(std::size_t elem_size, std::size_t send_size,
                                                    std::span<const std::int64_t> send_counts,
                                                    std::vector<std::int64_t>& recv_counts) {
  EXDYNA_CHECK_ARG(send_counts.size() == static_cast<std::size_t>(size()),
                   "alltoall_list: ", send_counts.size(), " counts given, expected one per rank (",
                   size(), ")");
  checked_total(send_counts, "send count");
  recv_counts.assign(static_cast<std::size_t>(size()), 0);
  bytes_.allgather_counts += recv_counts.size() * sizeof(std::int64_t);
  const CpuMeter meter(*this);
  do_alltoall_i64(send_counts, recv_counts);
  for (std::size_t j = 0; j < recv_counts.size(); ++j)
    if (recv_counts[j] < 0 || recv_counts[j] > (std::int64_t{1} << 40))
      throw CommError(detail::concat("alltoall_list: rank ", j, " announced ", recv_counts[j],
                                     " elements for rank ", rank(), "; expected 0 .. 2^40"));
  return count_alltoall(elem_size, send_size, send_counts, recv_counts);
}

std::int64_t Communicator::count_alltoall(std::size_t elem_size, std::size_t send_size,
                                          std::span<const std::int64_t> send_counts,
                                          std::span<const std::int64_t> recv_counts) {
  const auto n = static_cast<std::size_t>(size());
  EXDYNA_CHECK_ARG(send_counts.size() == n && recv_counts.size() == n,
                   "alltoall_list: ", send_counts.size(), " send and ", recv_counts.size(),
                   " receive counts given, expected one per rank (", n, ")");
  const auto sent = checked_total(send_counts, "send count");
  EXDYNA_CHECK_ARG(static_cast<std::size_t>(sent) == send_size, "alltoall_list: rank ", rank(),
                   " sends ", send_size, " elements but its counts add up to ", sent);
  const auto mine = send_counts[static_cast<std::size_t>(rank())];
  EXDYNA_CHECK_ARG(recv_counts[static_cast<std::size_t>(rank())] == mine, "alltoall_list: rank ",
                   rank(), " sends itself ", mine, " elements but expects ",
                   recv_counts[static_cast<std::size_t>(rank())]);
  bytes_.alltoall += static_cast<std::uint64_t>(sent - mine) * elem_size;
  return checked_total(recv_counts, "receive count");
}

std::int64_t Communicator::byte_lengths(std::span<const std::int64_t> counts, std::size_t elem_size,
                                        std::vector<std::int64_t>& out) {
  out.resize(counts.size());
  std::int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r)
    total += out[r] = counts[r] * static_cast<std::int64_t>(elem_size);
  return total;
}

void Communicator::allreduce_sum(std::span<float> data) {
  bytes_.allreduce += data.size_bytes();
  const CpuMeter meter(*this);
  do_allreduce_f32(data);
}

void Communicator::allgather_list_device(const void* mine, std::size_t elem_size,
                                         std::span<const std::int64_t> counts, GatherMode mode,
                                         void* out) {
  EXDYNA_CHECK_ARG(counts.size() == static_cast<std::size_t>(size()),
                   "allgather_list_device: ", counts.size(),
                   " counts given, expected one per rank (", size(), ")");
  count_allgatherv(elem_size, counts, mode,
                   static_cast<std::size_t>(counts[static_cast<std::size_t>(rank())]));
  const CpuMeter meter(*this);
  do_allgatherv_device(mine, elem_size, counts, mode, out);
}

void Communicator::allreduce_sum_device(float* data, std::size_t n) {
  bytes_.allreduce += n * sizeof(float);
  const CpuMeter meter(*this);
  do_allreduce_f32_device(data, n);
}

void Communicator::do_allgatherv_device(const void*, std::size_t, std::span<const std::int64_t>,
                                        GatherMode, void*) {
  throw InvalidArgument(
      detail::concat("engine '", engine(),
                     "' takes no device buffers; the GPU path needs a "
                     "torch.distributed group (NCCL, or Gloo with CUDA tensors)"));
}

void Communicator::do_allreduce_f32_device(float*, std::size_t) {
  do_allgatherv_device(nullptr, 0, {}, GatherMode::kPadded, nullptr);
}

void Communicator::allreduce_sum(std::span<double> data) {
  bytes_.allreduce += data.size_bytes();
  const CpuMeter meter(*this);
  do_allreduce_f64(data);
}

void Communicator::allreduce_sum_16(std::span<float> data, core::ValueFormat f) {
  EXDYNA_CHECK_ARG(f != core::ValueFormat::kFp32,
                   "allreduce_sum_16: fp32 is not a 16-bit format; use allreduce_sum");
  wire16_.resize(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) wire16_[i] = core::to_bits16(data[i], f);
  bytes_.allreduce += wire16_.size() * sizeof(std::uint16_t);
  const CpuMeter meter(*this);
  do_allreduce_16(wire16_, f);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = core::from_bits16(wire16_[i], f);
}

void Communicator::broadcast(std::span<std::byte> data, int root) {
  EXDYNA_CHECK_ARG(root >= 0 && root < size(), "broadcast: root ", root, " outside [0, ", size(),
                   ")");
  bytes_.broadcast += data.size_bytes();
  const CpuMeter meter(*this);
  do_broadcast(data, root);
}

void Communicator::barrier() {
  const CpuMeter meter(*this);
  do_barrier();
}

void Communicator::set_algorithm_switch(const AlgorithmSwitch&) {
  throw InvalidArgument(detail::concat("the ", engine(),
                                       " engine has no choice of collective algorithm; expected "
                                       "the gloo engine"));
}

}  // namespace exdyna::comm
