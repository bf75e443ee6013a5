#include "exdyna/comm/engines/mpi_communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace exdyna::comm {
namespace {

using Clock = std::chrono::steady_clock;

// MPI counts are int; larger buffers go in chunks of this many elements.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, static_cast<std::size_t>(len));
}

// The user-defined reductions of 16-bit values (MPI has no fp16/bf16 type): the words travel as
// MPI_UINT16_T and each pair is added in float32 and rounded back (core::add_bits16).
void sum_fp16(void* in, void* inout, int* len, MPI_Datatype*) {
  core::add_bits16(static_cast<std::uint16_t*>(inout), static_cast<const std::uint16_t*>(in),
                   static_cast<std::size_t>(*len), core::ValueFormat::kFp16);
}
void sum_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  core::add_bits16(static_cast<std::uint16_t*>(inout), static_cast<const std::uint16_t*>(in),
                   static_cast<std::size_t>(*len), core::ValueFormat::kBf16);
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(std::chrono::milliseconds timeout) {
    set_timeout(timeout);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // FUNNELED: only the thread that built the communicator calls MPI.
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw CommError("mpi: MPI_Init_thread failed");
      own_init_ = true;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    // Errors come back as return codes, turned into CommError naming the operation.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  ~MpiCommunicator() override {
    if (failed_) {
      // A request is still posted or a peer is gone: MPI_Finalize could block forever. Report and
      // take the whole job down, so every rank exits non-zero.
      std::fprintf(stderr, "exdyna: mpi: rank %d: aborting the MPI job after: %s\n", rank_,
                   failure_.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 2);
      return;
    }
    for (MPI_Op* op : {&op_fp16_, &op_bf16_})
      if (*op != MPI_OP_NULL) MPI_Op_free(op);
    MPI_Comm_free(&comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (own_init_ && !finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view engine() const override { return "mpi"; }

 protected:
  void do_allgatherv(const void* mine, std::size_t elem_size, std::span<const std::int64_t> counts,
                     GatherMode mode, void* out) override {
    const auto n = static_cast<std::size_t>(size_);
    if (mode == GatherMode::kPadded) {
      // The paper's padded all-gather: every rank really moves max(counts) elements.
      const std::int64_t m = *std::max_element(counts.begin(), counts.end());
      const std::size_t block = static_cast<std::size_t>(m) * elem_size;
      check_int(block, "padded all-gather block");
      send_.assign(block, std::byte{0});
      const std::size_t mine_bytes =
          static_cast<std::size_t>(counts[static_cast<std::size_t>(rank_)]) * elem_size;
      if (mine_bytes) std::memcpy(send_.data(), mine, mine_bytes);
      recv_.resize(block * n);
      MPI_Request req;
      check(MPI_Iallgather(send_.data(), static_cast<int>(block), MPI_BYTE, recv_.data(),
                           static_cast<int>(block), MPI_BYTE, comm_, &req),
            "allgather_list (padded)");
      wait(req, "allgather_list (padded)");
      auto* dst = static_cast<std::byte*>(out);
      for (std::size_t r = 0; r < n; ++r) {
        const std::size_t bytes = static_cast<std::size_t>(counts[r]) * elem_size;
        if (bytes) std::memcpy(dst, recv_.data() + r * block, bytes);
        dst += bytes;
      }
      return;
    }
    // Exact: MPI_Allgatherv with the true counts, no padding on the wire.
    rcounts_.resize(n);
    displs_.resize(n);
    std::size_t off = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const std::size_t bytes = static_cast<std::size_t>(counts[r]) * elem_size;
      check_int(bytes, "exact all-gather block");
      check_int(off, "exact all-gather displacement");
      rcounts_[r] = static_cast<int>(bytes);
      displs_[r] = static_cast<int>(off);
      off += bytes;
    }
    MPI_Request req;
    check(MPI_Iallgatherv(mine, rcounts_[static_cast<std::size_t>(rank_)], MPI_BYTE, out,
                          rcounts_.data(), displs_.data(), MPI_BYTE, comm_, &req),
          "allgather_list (exact)");
    wait(req, "allgather_list (exact)");
  }

  void do_allgather_i64(std::span<const std::int64_t> mine, std::span<std::int64_t> out) override {
    check_int(mine.size(), "allgather_counts length");
    MPI_Request req;
    check(MPI_Iallgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, out.data(),
                         static_cast<int>(mine.size()), MPI_INT64_T, comm_, &req),
          "allgather_counts");
    wait(req, "allgather_counts");
  }

  void do_alltoall_i64(std::span<const std::int64_t> send, std::span<std::int64_t> recv) override {
    MPI_Request req;
    check(MPI_Ialltoall(send.data(), 1, MPI_INT64_T, recv.data(), 1, MPI_INT64_T, comm_, &req),
          "alltoall_counts");
    wait(req, "alltoall_counts");
  }

  void do_alltoallv(const void* send, std::size_t elem_size,
                    std::span<const std::int64_t> send_counts,
                    std::span<const std::int64_t> recv_counts, void* recv) override {
    const auto n = static_cast<std::size_t>(size_);
    scounts_.resize(n);
    sdispls_.resize(n);
    rcounts_.resize(n);
    displs_.resize(n);
    std::size_t soff = 0, roff = 0;
    for (std::size_t r = 0; r < n; ++r) {
      const std::size_t sb = static_cast<std::size_t>(send_counts[r]) * elem_size;
      const std::size_t rb = static_cast<std::size_t>(recv_counts[r]) * elem_size;
      check_int(soff + sb, "all-to-all send buffer");
      check_int(roff + rb, "all-to-all receive buffer");
      scounts_[r] = static_cast<int>(sb);
      sdispls_[r] = static_cast<int>(soff);
      rcounts_[r] = static_cast<int>(rb);
      displs_[r] = static_cast<int>(roff);
      soff += sb;
      roff += rb;
    }
    // MPI wants valid buffers even when a rank sends or receives nothing.
    std::byte dummy{};
    MPI_Request req;
    check(MPI_Ialltoallv(soff ? send : &dummy, scounts_.data(), sdispls_.data(), MPI_BYTE,
                         roff ? recv : &dummy, rcounts_.data(), displs_.data(), MPI_BYTE, comm_,
                         &req),
          "alltoall_list");
    wait(req, "alltoall_list");
  }

  void do_allreduce_f32(std::span<float> data) override {
    allreduce(data.data(), data.size(), MPI_FLOAT);
  }
  void do_allreduce_f64(std::span<double> data) override {
    allreduce(data.data(), data.size(), MPI_DOUBLE);
  }
  void do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) override {
    MPI_Op& op = f == core::ValueFormat::kFp16 ? op_fp16_ : op_bf16_;
    if (op == MPI_OP_NULL)  // commutative: MPI may reorder, every rank still gets one result
      check(MPI_Op_create(f == core::ValueFormat::kFp16 ? &sum_fp16 : &sum_bf16, 1, &op),
            "allreduce_sum");
    allreduce(data.data(), data.size(), MPI_UINT16_T, op);
  }

  void do_broadcast(std::span<std::byte> data, int root) override {
    for (std::size_t off = 0; off < data.size(); off += kMaxChunk) {
      const std::size_t len = std::min(kMaxChunk, data.size() - off);
      MPI_Request req;
      check(MPI_Ibcast(data.data() + off, static_cast<int>(len), MPI_BYTE, root, comm_, &req),
            "broadcast");
      wait(req, "broadcast");
    }
  }

  void do_barrier() override {
    MPI_Request req;
    check(MPI_Ibarrier(comm_, &req), "barrier");
    wait(req, "barrier");
  }

 private:
  template <typename T>
  void allreduce(T* data, std::size_t n, MPI_Datatype type, MPI_Op op = MPI_SUM) {
    for (std::size_t off = 0; off < n; off += kMaxChunk) {
      const std::size_t len = std::min(kMaxChunk, n - off);
      MPI_Request req;
      check(MPI_Iallreduce(MPI_IN_PLACE, data + off, static_cast<int>(len), type, op, comm_, &req),
            "allreduce_sum");
      wait(req, "allreduce_sum");
    }
  }

  void check_int(std::size_t v, const char* what) const {
    EXDYNA_CHECK_ARG(v <= static_cast<std::size_t>(INT_MAX), "mpi: ", what, " of ", v,
                     " bytes exceeds MPI's int count limit (", INT_MAX, ")");
  }

  void check(int rc, const char* op) {
    if (failed_)
      throw CommError(detail::concat("mpi: rank ", rank_, ": ", op,
                                     " called after an earlier failure: ", failure_));
    if (rc != MPI_SUCCESS)
      fail<CommError>(
          detail::concat("mpi: rank ", rank_, ": ", op, " failed: ", mpi_error_string(rc)));
  }

  template <typename E>
  [[noreturn]] void fail(std::string msg) {
    failed_ = true;
    failure_ = msg;
    throw E(msg);
  }

  // Polls the request until it completes or the deadline passes. Spins briefly, then yields and
  // sleeps a little: with several ranks per core (mpirun --oversubscribe) pure spinning starves
  // the peer we are waiting for; OpenMPI progresses only inside MPI_Test, so sleeps stay short.
  void wait(MPI_Request& req, const char* op) {
    const auto start = Clock::now();
    const auto deadline = start + timeout();
    int done = 0;
    MPI_Status status;
    for (std::uint64_t spin = 0;; ++spin) {
      const int rc = MPI_Test(&req, &done, &status);
      if (rc != MPI_SUCCESS)
        fail<CommError>(
            detail::concat("mpi: rank ", rank_, ": ", op, " failed: ", mpi_error_string(rc)));
      if (done) return;
      if (spin < 64) continue;
      const auto now = Clock::now();
      if (now >= deadline)
        fail<TimeoutError>(detail::concat(
            "mpi: rank ", rank_, " timed out after ", timeout().count() / 1000.0, " s in ", op,
            " (a peer died or stopped calling collectives; MPI cannot tell which)"));
      if (now - start < std::chrono::milliseconds(2))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(
            std::chrono::microseconds(now - start < std::chrono::milliseconds(50) ? 20 : 200));
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Op op_fp16_ = MPI_OP_NULL, op_bf16_ = MPI_OP_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool own_init_ = false;
  bool failed_ = false;
  std::string failure_;
  std::vector<std::byte> send_, recv_;
  std::vector<int> rcounts_, displs_, scounts_, sdispls_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(std::chrono::milliseconds timeout) {
  return std::make_unique<MpiCommunicator>(timeout);
}

}  // namespace exdyna::comm
