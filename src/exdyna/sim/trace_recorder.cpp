#include "exdyna/sim/trace_recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/sim/trace_format.hpp"

namespace exdyna::sim {

namespace fs = std::filesystem;

void prepare_trace_dir(const fs::path& dir) {
  EXDYNA_CHECK_ARG(!dir.empty(), "trace directory is empty; expected a path");
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (fs::exists(st)) {
    EXDYNA_CHECK_ARG(fs::is_directory(st), "trace directory '", dir.string(),
                     "' exists and is not a directory; expected a new or empty directory");
    fs::directory_iterator it(dir, ec);
    if (ec)
      throw InvalidArgument(
          detail::concat("trace directory '", dir.string(), "' cannot be listed: ", ec.message()));
    if (it != fs::directory_iterator())
      throw InvalidArgument(detail::concat(
          "trace directory '", dir.string(), "' is not empty (it holds '",
          it->path().filename().string(),
          "'); expected a new or empty directory: a recording never overwrites a trace"));
    return;
  }
  fs::create_directories(dir, ec);
  if (ec)
    throw InvalidArgument(
        detail::concat("trace directory '", dir.string(), "' cannot be created: ", ec.message()));
}

TraceRecorder::TraceRecorder(const fs::path& dir, std::int64_t steps, comm::Communicator& comm)
    : dir_(dir), steps_(steps), comm_(comm) {
  EXDYNA_CHECK_ARG(steps >= 0, "trace steps ", steps,
                   " is not valid; expected >= 0 (0: record every step)");
  const fs::path data = dir / kTraceDataFile;
  // Rank 0 alone touches the directory; its verdict reaches every rank, so they fail together
  // instead of blocking in the next collective.
  std::array<char, 1024> verdict{};
  if (comm.rank() == 0) {
    try {
      prepare_trace_dir(dir);
      // O_EXCL: another job that raced us to the same directory is refused, not clobbered.
      fd_ = ::open(data.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd_ < 0)
        throw InvalidArgument(detail::concat("trace data file '", data.string(),
                                             "' cannot be created: ", std::strerror(errno)));
    } catch (const std::exception& e) {
      std::snprintf(verdict.data(), verdict.size(), "%s", e.what());
    }
  }
  comm.broadcast_values(std::span<char>(verdict), 0);
  if (verdict[0] != '\0') throw InvalidArgument(verdict.data());

  std::string mine;
  if (comm.rank() != 0) {
    fd_ = ::open(data.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0)
      mine = detail::concat("rank ", comm.rank(), " cannot open trace data file '", data.string(),
                            "': ", std::strerror(errno),
                            "; expected a directory every rank reaches (one machine or a shared "
                            "file system)");
  }
  double failed = mine.empty() ? 0 : 1;
  comm.allreduce_sum(std::span<double>(&failed, 1));
  if (failed > 0) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (comm.rank() == 0)
      ::unlink(data.c_str());  // ours, still empty: leave the directory reusable
    if (!mine.empty()) throw InvalidArgument(mine);
    throw InvalidArgument(detail::concat(
        failed, " rank(s) cannot open trace data file '", data.string(),
        "'; expected a directory every rank reaches (one machine or a shared file system)"));
  }
}

TraceRecorder::~TraceRecorder() {
  if (fd_ >= 0) ::close(fd_);
}

void TraceRecorder::record(std::span<const float> grad) {
  EXDYNA_CHECK(fd_ >= 0, "trace recorder of '", dir_.string(), "': record() after finish()");
  if (!wants_more()) return;
  const auto n = static_cast<std::int64_t>(grad.size());
  if (n_g_ == 0) {
    EXDYNA_CHECK_ARG(n > 0 && n <= kTraceMaxNg, "trace recorder: gradient of ", n,
                     " elements; expected 1..2^32-1");
    n_g_ = n;
  }
  EXDYNA_CHECK_ARG(n == n_g_, "trace recorder: gradient of ", n, " elements; expected n_g = ", n_g_,
                   " as in the first recorded step");
  const std::int64_t offset = (recorded_ * comm_.size() + comm_.rank()) * n_g_ * 4;
  const char* src = reinterpret_cast<const char*>(grad.data());
  std::vector<std::uint32_t> le;
  if constexpr (std::endian::native == std::endian::big) {
    le.resize(grad.size());
    for (std::size_t i = 0; i < grad.size(); ++i)
      le[i] = __builtin_bswap32(std::bit_cast<std::uint32_t>(grad[i]));
    src = reinterpret_cast<const char*>(le.data());
  }
  const std::size_t want = grad.size_bytes();
  std::size_t done = 0;
  while (done < want) {
    const ssize_t w = ::pwrite(fd_, src + done, want - done,
                               static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw DataError(detail::concat(
          "trace data file '", (dir_ / kTraceDataFile).string(), "': writing iteration ", recorded_,
          " of rank ", comm_.rank(), " at byte ", offset + static_cast<std::int64_t>(done),
          " failed: ", w < 0 ? std::strerror(errno) : "nothing written"));
    done += static_cast<std::size_t>(w);
  }
  ++recorded_;
}

TraceMeta TraceRecorder::finish() {
  EXDYNA_CHECK(fd_ >= 0, "trace recorder of '", dir_.string(), "': finish() called twice");
  const fs::path data = dir_ / kTraceDataFile;
  // Each rank makes its own slices durable before rank 0 publishes meta.json.
  const std::int64_t synced = ::fdatasync(fd_) == 0 && ::close(fd_) == 0 ? 1 : 0;
  fd_ = -1;
  const std::int64_t mine[3] = {n_g_, recorded_, synced};
  const int W = comm_.size();
  std::vector<std::int64_t> all(static_cast<std::size_t>(3 * W));
  comm_.allgather_counts(mine, all);  // also the barrier: every rank's writes are done
  for (int r = 0; r < W; ++r) {
    const auto* a = &all[static_cast<std::size_t>(3 * r)];
    EXDYNA_CHECK_T(DataError, a[2] == 1, "trace data file '", data.string(), "': rank ", r,
                   " could not sync its writes; the trace has no meta.json");
    EXDYNA_CHECK_T(DataError, a[0] == all[0] && a[1] == all[1], "trace '", dir_.string(),
                   "': rank ", r, " recorded ", a[1], " gradients of n_g = ", a[0], ", rank 0 ",
                   all[1], " of n_g = ", all[0], "; expected equal; the trace has no meta.json");
  }
  EXDYNA_CHECK(recorded_ > 0, "trace '", dir_.string(),
               "': no step was recorded (the run did no step); the trace has no meta.json");
  TraceMeta m;
  m.n_g = n_g_;
  m.workers = W;
  m.iterations = recorded_;
  // Rank 0 publishes; its verdict (the barrier too) reaches every rank, so all return once the
  // trace is readable, or all fail together.
  std::array<char, 1024> verdict{};
  if (comm_.rank() == 0) {
    try {
      // Every slice has been written, so the size is already right; truncate states it exactly.
      if (::truncate(data.c_str(), static_cast<off_t>(m.data_bytes())) != 0)
        throw DataError(detail::concat("trace data file '", data.string(),
                                       "': setting its size failed: ", std::strerror(errno)));
      write_trace_meta(dir_, m);
    } catch (const std::exception& e) {
      std::snprintf(verdict.data(), verdict.size(), "%s", e.what());
    }
  }
  comm_.broadcast_values(std::span<char>(verdict), 0);
  if (verdict[0] != '\0') throw DataError(verdict.data());
  return m;
}

}  // namespace exdyna::sim
