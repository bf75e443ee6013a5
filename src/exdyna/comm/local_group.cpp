#include "exdyna/comm/local_group.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace exdyna::comm {

struct LocalGroup::Shared {
  explicit Shared(int n) : size(n), slots(static_cast<std::size_t>(n), nullptr) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  std::uint64_t generation = 0;
  bool aborted = false;
  std::string reason;
  std::vector<const void*> slots;  // what each rank published for the current collective

  void abort(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (!aborted) {
      aborted = true;
      reason = why;
    }
    cv.notify_all();
  }

  // Meets all ranks. Throws CommError when the group is aborted, TimeoutError (and aborts the
  // group, so peers fail fast too) after `timeout`.
  void rendezvous(int rank, const char* op, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (aborted)
      throw CommError(detail::concat(op, " on rank ", rank, ": group aborted: ", reason));
    const auto gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    const bool done = cv.wait_for(lock, timeout, [&] { return generation != gen || aborted; });
    if (generation != gen) return;  // completed, even if an abort came right after
    if (aborted)
      throw CommError(detail::concat(op, " on rank ", rank, ": group aborted: ", reason));
    if (!done) {
      aborted = true;
      reason = detail::concat("rank ", rank, " timed out after ", timeout.count(), " ms in ", op,
                              " (", size - arrived, " of ", size, " ranks never arrived)");
      cv.notify_all();
      throw TimeoutError(reason);
    }
  }
};

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup::Shared> s, int rank)
      : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }
  std::string_view engine() const override { return "local"; }

 protected:
  void do_allgatherv(const void* mine, std::size_t elem_size, std::span<const std::int64_t> counts,
                     GatherMode, void* out) override {
    // Padding is only an accounting matter in shared memory; the counters in the base class
    // already charge it.
    publish(mine, "allgather_list");
    auto* dst = static_cast<std::byte*>(out);
    for (int r = 0; r < size(); ++r) {
      const auto n = static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]) * elem_size;
      if (n) std::memcpy(dst, s_->slots[static_cast<std::size_t>(r)], n);
      dst += n;
    }
    s_->rendezvous(rank_, "allgather_list (leave)", timeout());
  }

  void do_allgather_i64(std::span<const std::int64_t> mine, std::span<std::int64_t> out) override {
    publish(mine.data(), "allgather_counts");
    for (int r = 0; r < size(); ++r)
      std::memcpy(out.data() + static_cast<std::size_t>(r) * mine.size(),
                  s_->slots[static_cast<std::size_t>(r)], mine.size_bytes());
    s_->rendezvous(rank_, "allgather_counts (leave)", timeout());
  }

  void do_alltoall_i64(std::span<const std::int64_t> send, std::span<std::int64_t> recv) override {
    publish(send.data(), "alltoall_counts");
    for (int r = 0; r < size(); ++r)
      recv[static_cast<std::size_t>(r)] =
          static_cast<const std::int64_t*>(s_->slots[static_cast<std::size_t>(r)])[rank_];
    s_->rendezvous(rank_, "alltoall_counts (leave)", timeout());
  }

  // Each rank publishes its outbox (data and counts); every receiver copies its part of each.
  struct Outbox {
    const std::byte* data;
    const std::int64_t* counts;
  };
  void do_alltoallv(const void* send, std::size_t elem_size,
                    std::span<const std::int64_t> send_counts,
                    std::span<const std::int64_t> recv_counts, void* recv) override {
    const Outbox mine{static_cast<const std::byte*>(send), send_counts.data()};
    publish(&mine, "alltoall_list");
    auto* dst = static_cast<std::byte*>(recv);
    for (int r = 0; r < size(); ++r) {
      const auto* box = static_cast<const Outbox*>(s_->slots[static_cast<std::size_t>(r)]);
      std::size_t off = 0;
      for (int j = 0; j < rank_; ++j) off += static_cast<std::size_t>(box->counts[j]);
      const auto n = static_cast<std::size_t>(recv_counts[static_cast<std::size_t>(r)]) * elem_size;
      if (n) std::memcpy(dst, box->data + off * elem_size, n);
      dst += n;
    }
    s_->rendezvous(rank_, "alltoall_list (leave)", timeout());
  }

  void do_allreduce_f32(std::span<float> data) override {
    reduce(data, scratch_f32_, "allreduce_sum");
  }
  void do_allreduce_f64(std::span<double> data) override {
    reduce(data, scratch_f64_, "allreduce_sum");
  }

  // Rank order, a 16-bit accumulator: ((v_0 + v_1) + v_2) ..., each sum rounded to f.
  void do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) override {
    publish(data.data(), "allreduce_sum");
    const auto* first = static_cast<const std::uint16_t*>(s_->slots[0]);
    scratch_u16_.assign(first, first + data.size());
    for (int r = 1; r < size(); ++r)
      core::add_bits16(scratch_u16_.data(),
                       static_cast<const std::uint16_t*>(s_->slots[static_cast<std::size_t>(r)]),
                       data.size(), f);
    s_->rendezvous(rank_, "allreduce_sum (leave)", timeout());
    std::copy(scratch_u16_.begin(), scratch_u16_.end(), data.begin());
  }

  void do_broadcast(std::span<std::byte> data, int root) override {
    publish(data.data(), "broadcast");
    if (rank_ != root && !data.empty())
      std::memcpy(data.data(), s_->slots[static_cast<std::size_t>(root)], data.size());
    s_->rendezvous(rank_, "broadcast (leave)", timeout());
  }

  void do_barrier() override { s_->rendezvous(rank_, "barrier", timeout()); }

 private:
  void publish(const void* p, const char* op) {
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->slots[static_cast<std::size_t>(rank_)] = p;
    }
    s_->rendezvous(rank_, op, timeout());
  }

  template <typename T>
  void reduce(std::span<T> data, std::vector<T>& scratch, const char* op) {
    publish(data.data(), op);
    scratch.assign(data.size(), T(0));
    for (int r = 0; r < size(); ++r) {  // rank order: bit-identical sums on every rank
      const T* src = static_cast<const T*>(s_->slots[static_cast<std::size_t>(r)]);
      for (std::size_t i = 0; i < data.size(); ++i) scratch[i] += src[i];
    }
    s_->rendezvous(rank_, "allreduce_sum (leave)", timeout());
    std::copy(scratch.begin(), scratch.end(), data.begin());
  }

  std::shared_ptr<LocalGroup::Shared> s_;
  int rank_;
  std::vector<float> scratch_f32_;
  std::vector<double> scratch_f64_;
  std::vector<std::uint16_t> scratch_u16_;
};

}  // namespace

LocalGroup::LocalGroup(int size) {
  EXDYNA_CHECK_ARG(size >= 1, "local group size ", size, " is not valid; expected >= 1");
  shared_ = std::make_shared<Shared>(size);
}
LocalGroup::~LocalGroup() = default;
int LocalGroup::size() const {
  return shared_->size;
}

std::unique_ptr<Communicator> LocalGroup::communicator(int rank) {
  EXDYNA_CHECK_ARG(rank >= 0 && rank < shared_->size, "rank ", rank, " outside [0, ", shared_->size,
                   ")");
  return std::make_unique<LocalCommunicator>(shared_, rank);
}

void LocalGroup::abort(const std::string& reason) {
  shared_->abort(reason);
}

void run_local(int size, const std::function<void(Communicator&)>& fn,
               std::chrono::milliseconds timeout) {
  LocalGroup group(size);
  std::mutex err_mu;
  std::exception_ptr first;
  auto body = [&](int r) {
    try {
      auto comm = group.communicator(r);
      comm->set_timeout(timeout);
      fn(*comm);
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!first) first = std::current_exception();
      }
      group.abort(detail::concat("rank ", r, " failed: ", e.what()));
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(err_mu);
        if (!first) first = std::current_exception();
      }
      group.abort(detail::concat("rank ", r, " failed with an unknown exception"));
    }
  };
  if (size == 1) {
    body(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) threads.emplace_back(body, r);
    for (auto& t : threads) t.join();
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace exdyna::comm
