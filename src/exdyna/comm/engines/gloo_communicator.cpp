#include "exdyna/comm/engines/gloo_communicator.hpp"

#include "exdyna/comm/communicator_testing.hpp"
#include "exdyna/comm/engines/gloo_algorithm_switch.hpp"
#include "exdyna/comm/engines/gloo_algorithms.hpp"
#include "exdyna/comm/engines/process_group_communicator.hpp"
#include "exdyna/comm/job_token.hpp"

#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace exdyna::comm {

namespace {

constexpr std::chrono::milliseconds kMinRendezvous{30'000};

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : std::string(fallback ? fallback : "");
}

int env_int(const char* name, const char* fallback) {
  const std::string s = env_or(name, fallback);
  EXDYNA_CHECK_ARG(
      !s.empty(), "environment variable ", name,
      " is not set; the Gloo engine needs MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE "
      "(as torchrun sets them)");
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  EXDYNA_CHECK_ARG(errno == 0 && end && *end == '\0' && v >= 0 && v <= 1'000'000,
                   "environment variable ", name, "='", s,
                   "' is not valid; expected a non-negative integer");
  return static_cast<int>(v);
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

// True when nothing listens on the port yet (the check TCPStore's own error message lacks).
bool port_is_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return true;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);  // TCPStore's server binds the wildcard address
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok =
      ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 || errno != EADDRINUSE;
  ::close(fd);
  return ok;
}

// The job token's proof runs on the raw store (its keys live under exdyna/auth/).
class StoreProofs final : public ProofStore {
 public:
  explicit StoreProofs(c10d::Store& s) : s_(s) {}
  void set(const std::string& key, const std::string& value) override {
    s_.set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
  }
  bool has(const std::string& key) override { return s_.check({key}); }
  std::string get(const std::string& key) override {
    const auto v = s_.get(key);
    return std::string(v.begin(), v.end());
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override {
    return s_.add(key, delta);
  }

 private:
  c10d::Store& s_;
};

// Exposes the process group's Gloo context, for the exact all-gather (gloo::allgatherv), which
// c10d does not offer: its allgather insists on equal sizes.
class GlooGroup : public c10d::ProcessGroupGloo {
 public:
  using ProcessGroupGloo::ProcessGroupGloo;
  std::shared_ptr<::gloo::Context> context() { return contexts_.at(0); }
};

// In c10d mode the collectives are the process-group communicator's, over this engine's own
// ProcessGroupGloo; what is the Gloo engine's own is the rendezvous (store, job token, mesh), the
// direct path on the group's Gloo context, and the errors' name and post-mortem.
class GlooCommunicator final : public ProcessGroupCommunicator, public AlgorithmReport {
 public:
  explicit GlooCommunicator(const GlooConfig& cfg) : GlooCommunicator(cfg, connect(cfg)) {}

  std::string_view engine() const override { return "gloo"; }
  bool takes_device_buffers() const override { return false; }

  std::optional<AlgorithmSwitch> algorithm_switch() const override { return switch_; }
  // Every rank must set the same switch before the same call.
  void set_algorithm_switch(const AlgorithmSwitch& s) override {
    EXDYNA_CHECK_ARG(s.allreduce_below >= 0 && s.allgather_below >= 0, "algorithm switch ",
                     s.allreduce_below, ",", s.allgather_below,
                     " is not valid; expected byte counts >= 0");
    switch_ = s;
  }
  std::string_view last_algorithm() const override { return last_; }  // AlgorithmReport

 protected:
  void do_allgatherv(const void* mine, std::size_t elem_size, std::span<const std::int64_t> counts,
                     GatherMode mode, void* out) override {
    if (mode == GatherMode::kPadded) {
      // The paper's padded all-gather: equal-size tensors of max(counts) elements really move
      // (gather_blocks picks the path).
      ProcessGroupCommunicator::do_allgatherv(mine, elem_size, counts, mode, out);
      return;
    }
    // Exact: gloo::allgatherv with each rank's true size; nothing but the payload travels.
    const auto n = static_cast<std::size_t>(size());
    std::vector<std::size_t> sizes(n);
    std::size_t total = 0;
    for (std::size_t r = 0; r < n; ++r)
      total += sizes[r] = static_cast<std::size_t>(counts[r]) * elem_size;
    if (total == 0) return;
    const auto a = for_allgather(total);
    direct("allgather_list (exact)", [&](std::uint32_t tag) {
      gloo_allgatherv(group_->context(), tag, timeout(), mine, sizes, out, a);
    });
  }

  void gather_blocks(const std::byte* send, std::size_t block, std::byte* recv) override {
    const auto n = static_cast<std::size_t>(size());
    if (for_allgather(block * n) == GlooAlgorithm::kLog) {
      gather_log("allgather_list (padded)", send, block, recv);
      return;
    }
    if (cfg_.via_c10d) {
      ProcessGroupCommunicator::gather_blocks(send, block, recv);
      return;
    }
    direct("allgather_list (padded)", [&](std::uint32_t tag) {
      ::gloo::AllgatherOptions o(group_->context());
      o.setTag(tag);
      o.setTimeout(timeout());
      o.setInput(reinterpret_cast<std::uint8_t*>(const_cast<std::byte*>(send)), block);
      o.setOutput(reinterpret_cast<std::uint8_t*>(recv), block * static_cast<std::size_t>(size()));
      ::gloo::allgather(o);
    });
  }

  void do_allgather_i64(std::span<const std::int64_t> mine, std::span<std::int64_t> out) override {
    if (for_allgather(out.size_bytes()) == GlooAlgorithm::kLog) {
      gather_log("allgather_counts", reinterpret_cast<const std::byte*>(mine.data()),
                 mine.size_bytes(), reinterpret_cast<std::byte*>(out.data()));
      return;
    }
    if (cfg_.via_c10d) {
      ProcessGroupCommunicator::do_allgather_i64(mine, out);
      return;
    }
    direct("allgather_counts", [&](std::uint32_t tag) {
      ::gloo::AllgatherOptions o(group_->context());
      o.setTag(tag);
      o.setTimeout(timeout());
      o.setInput(const_cast<std::int64_t*>(mine.data()), mine.size());
      o.setOutput(out.data(), out.size());
      ::gloo::allgather(o);
    });
  }

  void do_alltoall_i64(std::span<const std::int64_t> send, std::span<std::int64_t> recv) override {
    if (cfg_.via_c10d) {
      ProcessGroupCommunicator::do_alltoall_i64(send, recv);
      return;
    }
    direct("alltoall_counts", [&](std::uint32_t tag) {
      ::gloo::AlltoallOptions o(group_->context());
      o.setTag(tag);
      o.setTimeout(timeout());
      o.setInput(const_cast<std::int64_t*>(send.data()), send.size());
      o.setOutput(recv.data(), recv.size());
      ::gloo::alltoall(o);
    });
  }

  // Byte lists on both paths. gloo::alltoallv sends to rank + i and receives from rank - i in
  // round i, the destination rotation Ok-Topk asks of its reduce-scatter.
  void do_alltoallv(const void* send, std::size_t elem_size,
                    std::span<const std::int64_t> send_counts,
                    std::span<const std::int64_t> recv_counts, void* recv) override {
    if (cfg_.via_c10d) {
      ProcessGroupCommunicator::do_alltoallv(send, elem_size, send_counts, recv_counts, recv);
      return;
    }
    std::vector<std::int64_t> sb, rb;
    const std::int64_t st = byte_lengths(send_counts, elem_size, sb);
    const std::int64_t rt = byte_lengths(recv_counts, elem_size, rb);
    std::uint8_t dummy_in = 0, dummy_out = 0;  // empty buffers still need a valid address
    direct("alltoall_list", [&](std::uint32_t tag) {
      ::gloo::AlltoallvOptions o(group_->context());
      o.setTag(tag);
      o.setTimeout(timeout());
      o.setInput(st ? static_cast<std::uint8_t*>(const_cast<void*>(send)) : &dummy_in, sb);
      o.setOutput(rt ? static_cast<std::uint8_t*>(recv) : &dummy_out, rb);
      ::gloo::alltoallv(o);
    });
  }

  void do_allreduce_f32(std::span<float> data) override {
    const auto a = for_allreduce(data.size_bytes());
    if (cfg_.via_c10d && a == GlooAlgorithm::kRing) {
      ProcessGroupCommunicator::do_allreduce_f32(data);
      return;
    }
    allreduce_direct(data.data(), data.size(), a);
  }
  void do_allreduce_f64(std::span<double> data) override {
    const auto a = for_allreduce(data.size_bytes());
    if (cfg_.via_c10d && a == GlooAlgorithm::kRing) {
      ProcessGroupCommunicator::do_allreduce_f64(data);
      return;
    }
    allreduce_direct(data.data(), data.size(), a);
  }
  // 16-bit values go through gloo::allreduce on the group's context on both paths: c10d's
  // ProcessGroupGloo 1.13 reduces kHalf but not kBFloat16, and one reduction for both formats
  // (core::add_bits16: each pair added in float32, rounded back) keeps fp16 and bf16 alike at 2
  // bytes a value (the process-group communicator sends bf16 widened to float32).
  void do_allreduce_16(std::span<std::uint16_t> data, core::ValueFormat f) override {
    if (data.empty()) return;
    const auto a = for_allreduce(data.size_bytes());
    // c may alias x: each element is read before it is written.
    const auto add = [f](void* c, const void* x, const void* y, std::size_t n) {
      auto* out = static_cast<std::uint16_t*>(c);
      const auto* p = static_cast<const std::uint16_t*>(x);
      const auto* q = static_cast<const std::uint16_t*>(y);
      for (std::size_t i = 0; i < n; ++i)
        out[i] = core::to_bits16(core::from_bits16(p[i], f) + core::from_bits16(q[i], f), f);
    };
    direct("allreduce_sum", [&](std::uint32_t tag) {
      gloo_allreduce(group_->context(), tag, timeout(), data.data(), data.size(), add, a);
    });
  }

  // Host buffers only: the engine refuses device buffers, naming itself, on both paths.
  void do_allgatherv_device(const void* mine, std::size_t elem_size,
                            std::span<const std::int64_t> counts, GatherMode mode,
                            void* out) override {
    Communicator::do_allgatherv_device(mine, elem_size, counts, mode, out);
  }
  void do_allreduce_f32_device(float* data, std::size_t n) override {
    Communicator::do_allreduce_f32_device(data, n);
  }

  void do_broadcast(std::span<std::byte> data, int root) override {
    if (cfg_.via_c10d) {
      ProcessGroupCommunicator::do_broadcast(data, root);
      return;
    }
    if (data.empty()) return;
    direct("broadcast", [&](std::uint32_t tag) {
      ::gloo::BroadcastOptions o(group_->context());
      o.setTag(tag);
      o.setTimeout(timeout());
      o.setRoot(root);
      o.setOutput(reinterpret_cast<std::uint8_t*>(data.data()), data.size());
      ::gloo::broadcast(o);
    });
  }

  void do_barrier() override {
    if (cfg_.via_c10d) {
      ProcessGroupCommunicator::do_barrier();
      return;
    }
    direct("barrier", [&](std::uint32_t tag) {
      ::gloo::BarrierOptions o(group_->context());
      o.setTag(tag);
      o.setTimeout(timeout());
      ::gloo::barrier(o);
    });
  }

  std::string failure_label() const override { return "gloo"; }
  std::string refusal_label() const override { return "gloo"; }
  std::string failure_note() override { return diagnose(); }

 private:
  struct Rendezvous {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<GlooGroup> group;
  };

  // The base is built on the process group, so the rendezvous that creates it runs first, in
  // connect(). The process group's default timeout bounds the mesh set-up; --timeout is enforced
  // per call by run() (c10d path) and by the Gloo options (direct path).
  GlooCommunicator(const GlooConfig& cfg, Rendezvous r)
      : ProcessGroupCommunicator(r.group, cfg.timeout),
        cfg_(cfg),
        store_(std::move(r.store)),
        group_(std::move(r.group)),
        switch_(initial_switch()) {}

  static Rendezvous connect(const GlooConfig& cfg) {
    cfg.validate();
    const bool server = cfg.rank == 0;
    if (server && !port_is_free(cfg.master_port))
      throw CommError(
          detail::concat("gloo: MASTER_PORT ", cfg.master_port,
                         " is already in use on this machine (another exdyna or torch job?); "
                         "choose a free port with MASTER_PORT"));
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(cfg.master_port);
    so.isServer = server;
    so.numWorkers = static_cast<std::size_t>(cfg.world_size);
    so.waitWorkers = false;  // the process group's rendezvous waits for everyone anyway
    // Start-up (processes loading libtorch, connecting the full mesh) is not a collective and can
    // be slow on a loaded machine: it gets at least kMinRendezvous even when --timeout is short.
    const auto rdv = std::max(cfg.timeout, kMinRendezvous);
    so.timeout = rdv;
    Rendezvous r;
    try {
      r.store = c10::make_intrusive<c10d::TCPStore>(cfg.master_addr, so);
    } catch (const std::exception& e) {
      if (server)
        throw CommError(detail::concat(
            "gloo: rank 0 could not start the rendezvous store on port ", cfg.master_port,
            " (in use? choose another MASTER_PORT): ", first_line(e.what())));
      throw CommError(detail::concat("gloo: rank ", cfg.rank,
                                     " could not reach the rendezvous store at ", cfg.master_addr,
                                     ":", cfg.master_port, " within ", rdv.count() / 1000.0,
                                     " s (is rank 0 running?): ", first_line(e.what())));
    }
    prove_member(cfg, *r.store, rdv);
    auto opts = c10d::ProcessGroupGloo::Options::create(rdv);
    std::string listen = cfg.listen_addr;
    if (listen.empty() && is_loopback(cfg.master_addr)) listen = "127.0.0.1";
    try {
      opts->devices.push_back(listen.empty()
                                  ? c10d::ProcessGroupGloo::createDefaultDevice()
                                  : c10d::ProcessGroupGloo::createDeviceForHostname(listen));
    } catch (const std::exception& e) {
      throw CommError(detail::concat("gloo: rank ", cfg.rank, " cannot listen on '", listen,
                                     "': ", first_line(e.what())));
    }
    opts->threads = 1;  // calls are issued and waited one at a time
    try {
      auto prefixed = c10::make_intrusive<c10d::PrefixStore>("exdyna/pg", r.store);
      r.group = c10::make_intrusive<GlooGroup>(prefixed, cfg.rank, cfg.world_size, opts);
    } catch (const std::exception& e) {
      throw CommError(detail::concat("gloo: rank ", cfg.rank, " could not connect to its ",
                                     cfg.world_size - 1, " peers within ", rdv.count() / 1000.0,
                                     " s: ", first_line(e.what())));
    }
    return r;
  }

  // Before any peer connection: every rank proves the job token (comm/job_token.hpp), so a process
  // that only reached the store never becomes part of the mesh.
  static void prove_member(const GlooConfig& cfg, c10d::Store& store,
                           std::chrono::milliseconds within) {
    StoreProofs proofs(store);
    MembershipResult m;
    try {
      m = prove_membership(proofs, cfg.rank, cfg.world_size, cfg.job_token, within);
    } catch (const exdyna::Error&) {
      throw;
    } catch (const std::exception& e) {
      throw CommError(detail::concat(
          "gloo: rank ", cfg.rank,
          ": the job token check lost the rendezvous store: ", first_line(e.what())));
    }
    if (!m.secured && cfg.rank == 0)
      std::fprintf(stderr,
                   "exdyna: warning: EXDYNA_JOB_TOKEN is not set: any process that reaches "
                   "%s:%d can join this job (docs/reliability.md)\n",
                   cfg.master_addr.c_str(), cfg.master_port);
  }

  // In place; the ring is ProcessGroupGloo's own call: same algorithm, same summation order.
  template <typename T>
  void allreduce_direct(T* data, std::size_t n, GlooAlgorithm a) {
    if (n == 0) return;
    direct("allreduce_sum", [&](std::uint32_t tag) {
      gloo_allreduce(
          group_->context(), tag, timeout(), data, n,
          static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&::gloo::sum<T>), a);
    });
  }

  // Equal blocks of `block` bytes, Bruck's all-gather.
  void gather_log(const char* op, const std::byte* send, std::size_t block, std::byte* recv) {
    const std::vector<std::size_t> sizes(static_cast<std::size_t>(size()), block);
    direct(op, [&](std::uint32_t tag) {
      gloo_allgatherv(group_->context(), tag, timeout(), send, sizes, recv, GlooAlgorithm::kLog);
    });
  }

  // The algorithm for a collective of `bytes` (its result), noted for last_algorithm().
  GlooAlgorithm for_allreduce(std::size_t bytes) {
    return choose(bytes, switch_.allreduce_below, allreduce_name);
  }
  GlooAlgorithm for_allgather(std::size_t bytes) {
    return choose(bytes, switch_.allgather_below, allgather_name);
  }
  GlooAlgorithm choose(std::size_t bytes, std::int64_t below, const char* (*name)(GlooAlgorithm)) {
    const auto a =
        static_cast<std::int64_t>(bytes) < below ? GlooAlgorithm::kLog : GlooAlgorithm::kRing;
    last_ = name(a);
    return a;
  }

  // The configured switch, or the one measured on this job's links (size 1: nothing to choose).
  AlgorithmSwitch initial_switch() {
    if (cfg_.algorithm_switch) return *cfg_.algorithm_switch;
    if (size() == 1) return {};
    try {
      return measure_algorithm_switch(group_->context(), timeout(), kSwitchTags);
    } catch (const std::exception& e) {
      throw CommError(detail::concat("gloo: rank ", rank(),
                                     ": measuring where the log-round collectives pay failed "
                                     "(set EXDYNA_GLOO_LOG_BELOW to skip it): ",
                                     first_line(e.what()), diagnose()));
    }
  }

  // Runs one Gloo algorithm on the calling thread, on the process group's context, with the
  // communicator's timeout; numbered and failed like the c10d collectives (begin/fail). Tags of
  // c10d's own collectives count up from 0; ours live in the upper half, so the two paths never
  // share a slot.
  template <typename Body>
  void direct(const char* op, Body&& body) {
    const std::uint64_t seq = begin(op);
    try {
      body(0x80000000u | static_cast<std::uint32_t>(seq & 0x7fffffff));
    } catch (const std::exception& e) {
      fail(op, e.what());
    }
  }

  // Post-mortem through the rendezvous store: every surviving rank posts a note, then looks for a
  // moment for the others' notes. Ranks that never post are dead or no longer calling
  // collectives. Costs nothing unless something already failed. The store calls run on a thread of
  // their own with a 3 s bound: on a rank whose own link is down, a store call blocks for the
  // socket's whole rendezvous timeout, and the error must not wait for it.
  std::string diagnose() {
    auto answer = std::make_shared<std::promise<std::string>>();
    auto future = answer->get_future();
    std::thread([store = store_, r = rank(), n = size(), answer] {
      answer->set_value(look_for_failures(*store, r, n));
    }).detach();  // holds its own reference to the store; left behind only when the store hangs
    if (future.wait_for(std::chrono::seconds(3)) != std::future_status::ready)
      return "; the rendezvous store did not answer within 3 s (this rank's link, or rank 0's, "
             "may be down)";
    return future.get();
  }

  static std::string look_for_failures(c10d::Store& store, int me, int n) {
    try {
      store.setTimeout(std::chrono::seconds(2));
      const std::string key = "exdyna/failed/";
      store.set(key + std::to_string(me), std::vector<std::uint8_t>{1});
      std::vector<int> missing;
      for (int tries = 0; tries < 15; ++tries) {
        missing.clear();
        for (int r = 0; r < n; ++r)
          if (r != me && !store.check({key + std::to_string(r)})) missing.push_back(r);
        if (missing.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (missing.empty()) return "; every other rank reported a failure too";
      std::string list;
      for (auto r : missing) list += (list.empty() ? "" : ",") + std::to_string(r);
      return detail::concat("; rank(s) ", list,
                            " did not report a failure within 1.5 s (dead, unreachable, no longer "
                            "calling collectives, or still waiting on another rank)");
    } catch (const std::exception&) {
      return "; the rendezvous store is unreachable (rank 0 may be gone)";
    }
  }

  // The start-up sweep's tags: apart from c10d's (counting up from 0) and direct()'s (upper half).
  static constexpr std::uint32_t kSwitchTags = 0x40000000u;

  GlooConfig cfg_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<GlooGroup> group_;
  AlgorithmSwitch switch_;
  const char* last_ = "ring";
};

}  // namespace

GlooConfig GlooConfig::from_env() {
  GlooConfig c;
  c.master_addr = env_or("MASTER_ADDR", "127.0.0.1");
  c.master_port = env_int("MASTER_PORT", "29500");
  c.rank = env_int("RANK", nullptr);
  c.world_size = env_int("WORLD_SIZE", nullptr);
  c.local_rank = env_int("LOCAL_RANK", "0");
  c.listen_addr = env_or("EXDYNA_LISTEN_ADDR", "");
  const std::string path = env_or("EXDYNA_GLOO_PATH", "c10d");
  EXDYNA_CHECK_ARG(path == "direct" || path == "c10d", "EXDYNA_GLOO_PATH='", path,
                   "' is not valid; expected direct or c10d");
  c.via_c10d = path == "c10d";
  c.algorithm_switch = parse_algorithm_switch(env_or("EXDYNA_GLOO_LOG_BELOW", "auto"));
  c.job_token = job_token_from_env();
  return c;
}

void GlooConfig::validate() const {
  EXDYNA_CHECK_ARG(world_size >= 1, "WORLD_SIZE ", world_size, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(rank >= 0 && rank < world_size, "RANK ", rank, " is not valid; expected 0..",
                   world_size - 1, " (WORLD_SIZE ", world_size, ")");
  EXDYNA_CHECK_ARG(master_port >= 1 && master_port <= 65535, "MASTER_PORT ", master_port,
                   " is not valid; expected 1..65535");
  EXDYNA_CHECK_ARG(!master_addr.empty(), "MASTER_ADDR is empty; expected a host name or address");
  EXDYNA_CHECK_ARG(timeout.count() > 0, "timeout ", timeout.count(),
                   " ms is not valid; expected > 0");
}

std::unique_ptr<Communicator> make_gloo_communicator(const GlooConfig& cfg) {
  return std::make_unique<GlooCommunicator>(cfg);
}

}  // namespace exdyna::comm
