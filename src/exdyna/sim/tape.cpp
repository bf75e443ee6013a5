#include "exdyna/sim/tape.hpp"

#include <cstring>
#include <numeric>

#include "exdyna/core/error.hpp"

namespace exdyna::sim {

const char* to_string(Tape::Op op) {
  switch (op) {
    case Tape::Op::kAllgatherList:
      return "allgather_list";
    case Tape::Op::kAllgatherCounts:
      return "allgather_counts";
    case Tape::Op::kAlltoallCounts:
      return "alltoall (counts)";
    case Tape::Op::kAlltoallList:
      return "alltoall_list";
    case Tape::Op::kAllreduceF32:
      return "allreduce_sum (f32)";
    case Tape::Op::kAllreduceF64:
      return "allreduce_sum (f64)";
    case Tape::Op::kAllreduce16:
      return "allreduce_sum_16";
    case Tape::Op::kBroadcast:
      return "broadcast";
    case Tape::Op::kBarrier:
      return "barrier";
  }
  return "?";
}

namespace {

// Element counts as byte counts, into `out` (reused across calls), so the recorder can move any
// element type as bytes.
std::span<const std::int64_t> in_bytes(std::span<const std::int64_t> counts, std::size_t elem_size,
                                       std::vector<std::int64_t>& out) {
  out.assign(counts.begin(), counts.end());
  for (auto& c : out) c *= static_cast<std::int64_t>(elem_size);
  return out;
}

std::size_t sum(std::span<const std::int64_t> v) {
  return static_cast<std::size_t>(std::accumulate(v.begin(), v.end(), std::int64_t{0}));
}

}  // namespace

// ---- TapeRecorder ----

TapeRecorder::TapeRecorder(Communicator& inner, Tape& tape) : inner_(inner), tape_(tape) {
  tape_.rank = inner.rank();
  tape_.size = inner.size();
  tape_.entries.clear();
  tape_.bytes = 0;
  tape_.overflowed = false;
}

void TapeRecorder::record(Tape::Op op, const void* result, std::size_t bytes) {
  if (tape_.overflowed) return;
  if (bytes > tape_.limit - tape_.bytes) {
    tape_.overflowed = true;
    tape_.entries = {};
    tape_.bytes = 0;
    return;
  }
  const auto* p = static_cast<const std::byte*>(result);
  tape_.entries.push_back({op, std::vector<std::byte>(p, p + bytes)});
  tape_.bytes += bytes;
}

void TapeRecorder::do_allgatherv(const void* mine, std::size_t elem_size,
                                 std::span<const std::int64_t> counts, GatherMode mode, void* out) {
  inner_.set_timeout(timeout());
  const auto b = in_bytes(counts, elem_size, counts_scratch_);
  const std::span<const std::byte> m(static_cast<const std::byte*>(mine),
                                     static_cast<std::size_t>(b[static_cast<std::size_t>(rank())]));
  inner_.allgather_list<std::byte>(m, b, mode, bytes_scratch_);
  if (!bytes_scratch_.empty()) std::memcpy(out, bytes_scratch_.data(), bytes_scratch_.size());
  record(Tape::Op::kAllgatherList, out, bytes_scratch_.size());
}

void TapeRecorder::do_allgather_i64(std::span<const std::int64_t> mine,
                                    std::span<std::int64_t> out) {
  inner_.set_timeout(timeout());
  inner_.allgather_counts(mine, out);
  record(Tape::Op::kAllgatherCounts, out.data(), out.size_bytes());
}

void TapeRecorder::do_alltoall_i64(std::span<const std::int64_t> send,
                                   std::span<std::int64_t> recv) {
  inner_.set_timeout(timeout());
  counts_scratch_.assign(send.size(), 1);  // one int64 to and from every rank
  inner_.alltoall_list_known<std::int64_t>(send, counts_scratch_, counts_scratch_, i64_scratch_);
  std::copy(i64_scratch_.begin(), i64_scratch_.end(), recv.begin());
  record(Tape::Op::kAlltoallCounts, recv.data(), recv.size_bytes());
}

void TapeRecorder::do_alltoallv(const void* send, std::size_t elem_size,
                                std::span<const std::int64_t> send_counts,
                                std::span<const std::int64_t> recv_counts, void* recv) {
  inner_.set_timeout(timeout());
  const auto sb = in_bytes(send_counts, elem_size, counts_scratch_);
  const auto rb = in_bytes(recv_counts, elem_size, recv_counts_scratch_);
  const std::span<const std::byte> s(static_cast<const std::byte*>(send), sum(sb));
  inner_.alltoall_list_known<std::byte>(s, sb, rb, bytes_scratch_);
  if (!bytes_scratch_.empty()) std::memcpy(recv, bytes_scratch_.data(), bytes_scratch_.size());
  record(Tape::Op::kAlltoallList, recv, bytes_scratch_.size());
}

void TapeRecorder::do_allreduce_f32(std::span<float> data) {
  inner_.set_timeout(timeout());
  inner_.allreduce_sum(data);
  record(Tape::Op::kAllreduceF32, data.data(), data.size_bytes());
}

void TapeRecorder::do_allreduce_f64(std::span<double> data) {
  inner_.set_timeout(timeout());
  inner_.allreduce_sum(data);
  record(Tape::Op::kAllreduceF64, data.data(), data.size_bytes());
}

void TapeRecorder::do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) {
  inner_.set_timeout(timeout());
  // The public call takes floats already representable in f: the words' values, exactly.
  f32_scratch_.resize(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) f32_scratch_[i] = core::from_bits16(data[i], f);
  inner_.allreduce_sum_16(f32_scratch_, f);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = core::to_bits16(f32_scratch_[i], f);
  record(Tape::Op::kAllreduce16, data.data(), data.size_bytes());
}

void TapeRecorder::do_broadcast(std::span<std::byte> data, int root) {
  inner_.set_timeout(timeout());
  inner_.broadcast(data, root);
  record(Tape::Op::kBroadcast, data.data(), data.size());
}

void TapeRecorder::do_barrier() {
  inner_.set_timeout(timeout());
  inner_.barrier();
  record(Tape::Op::kBarrier, nullptr, 0);
}

// ---- TapePlayer ----

TapePlayer::TapePlayer(const Tape& tape) : tape_(tape) {
  EXDYNA_CHECK_ARG(tape.size >= 1 && tape.rank >= 0 && tape.rank < tape.size, "tape of rank ",
                   tape.rank, " in a group of ", tape.size, "; expected 0 <= rank < size");
  EXDYNA_CHECK_ARG(!tape.overflowed, "tape of rank ", tape.rank, " outgrew its limit of ",
                   tape.limit, " bytes and holds nothing to replay");
}

void TapePlayer::play(Tape::Op op, void* out, std::size_t bytes) {
  if (next_ >= tape_.entries.size())
    throw DataError("tape of rank " + std::to_string(tape_.rank) + ": call " +
                    std::to_string(next_) + " (" + to_string(op) + ") is past the tape's " +
                    std::to_string(tape_.entries.size()) + " recorded collectives");
  const auto& e = tape_.entries[next_];
  if (e.op != op || e.result.size() != bytes)
    throw DataError("tape of rank " + std::to_string(tape_.rank) + ": call " +
                    std::to_string(next_) + " is " + to_string(op) + " with " +
                    std::to_string(bytes) + " bytes of result, but the tape recorded " +
                    to_string(e.op) + " with " + std::to_string(e.result.size()) +
                    ": the replay diverged from the recorded run");
  if (bytes) std::memcpy(out, e.result.data(), bytes);
  ++next_;
}

void TapePlayer::check_own(const void* mine, const void* at, std::size_t bytes) const {
  if (bytes && std::memcmp(mine, at, bytes) != 0)
    throw DataError("tape of rank " + std::to_string(tape_.rank) + ": call " +
                    std::to_string(next_ - 1) + " sends " + std::to_string(bytes) +
                    " bytes that differ from what the rank sent in the recorded run: the replay "
                    "diverged from it");
}

void TapePlayer::do_allgatherv(const void* mine, std::size_t elem_size,
                               std::span<const std::int64_t> counts, GatherMode, void* out) {
  play(Tape::Op::kAllgatherList, out, sum(counts) * elem_size);
  const auto r = static_cast<std::size_t>(tape_.rank);
  check_own(mine, static_cast<const std::byte*>(out) + sum(counts.first(r)) * elem_size,
            static_cast<std::size_t>(counts[r]) * elem_size);
}

void TapePlayer::do_allgather_i64(std::span<const std::int64_t> mine, std::span<std::int64_t> out) {
  play(Tape::Op::kAllgatherCounts, out.data(), out.size_bytes());
  check_own(mine.data(), out.data() + static_cast<std::size_t>(tape_.rank) * mine.size(),
            mine.size_bytes());
}

void TapePlayer::do_alltoall_i64(std::span<const std::int64_t>, std::span<std::int64_t> recv) {
  play(Tape::Op::kAlltoallCounts, recv.data(), recv.size_bytes());
}

void TapePlayer::do_alltoallv(const void*, std::size_t elem_size, std::span<const std::int64_t>,
                              std::span<const std::int64_t> recv_counts, void* recv) {
  play(Tape::Op::kAlltoallList, recv, sum(recv_counts) * elem_size);
}

void TapePlayer::do_allreduce_f32(std::span<float> data) {
  play(Tape::Op::kAllreduceF32, data.data(), data.size_bytes());
}

void TapePlayer::do_allreduce_f64(std::span<double> data) {
  play(Tape::Op::kAllreduceF64, data.data(), data.size_bytes());
}

void TapePlayer::do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat) {
  play(Tape::Op::kAllreduce16, data.data(), data.size_bytes());
}

void TapePlayer::do_broadcast(std::span<std::byte> data, int) {
  play(Tape::Op::kBroadcast, data.data(), data.size());
}

void TapePlayer::do_barrier() {
  play(Tape::Op::kBarrier, nullptr, 0);
}

}  // namespace exdyna::sim
