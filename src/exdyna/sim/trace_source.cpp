#include "exdyna/sim/trace_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include "exdyna/core/error.hpp"

namespace exdyna::sim {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMeta = kTraceMetaFile;
constexpr const char* kData = kTraceDataFile;

}  // namespace

TraceSource::TraceSource(const fs::path& dir)
    : dir_(dir), data_path_(dir / kData), meta_(read_trace_meta(dir)) {
  fd_ = ::open(data_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    throw InvalidArgument(detail::concat("trace data file '", data_path_.string(),
                                         "' cannot be opened: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw InvalidArgument(
        detail::concat("trace data file '", data_path_.string(), "' is not a regular file"));
  }
  const std::int64_t expected = meta_.data_bytes();
  const auto actual = static_cast<std::int64_t>(st.st_size);
  if (actual != expected) {
    ::close(fd_);
    fd_ = -1;
    throw DataError(detail::concat("trace data file '", data_path_.string(), "' has ", actual,
                                   " bytes; meta.json (iterations ", meta_.iterations, ", workers ",
                                   meta_.workers, ", n_g ", meta_.n_g, ") says ", expected,
                                   " bytes (",
                                   actual < expected ? "the trace is shorter than meta.json says"
                                                     : "the trace is longer than meta.json says",
                                   ")"));
  }
}

TraceSource::~TraceSource() {
  if (fd_ >= 0) ::close(fd_);
}

void TraceSource::fill(std::int64_t t, int worker, std::span<float> grad) {
  EXDYNA_CHECK_ARG(t >= 0 && t < meta_.iterations, "trace '", dir_.string(), "': iteration ", t,
                   " is not recorded; expected 0..", meta_.iterations - 1);
  EXDYNA_CHECK_ARG(worker >= 0 && worker < meta_.workers, "trace '", dir_.string(), "': worker ",
                   worker, " is not recorded; expected 0..", meta_.workers - 1);
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(grad.size()) == meta_.n_g, "trace '", dir_.string(),
                   "': buffer has ", grad.size(), " elements, expected n_g = ", meta_.n_g);
  const std::int64_t offset = meta_.offset(t, worker);
  auto* dst = reinterpret_cast<char*>(grad.data());
  std::size_t done = 0;
  const std::size_t want = grad.size_bytes();
  while (done < want) {
    const ssize_t r = ::pread(fd_, dst + done, want - done,
                              static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw DataError(
          detail::concat("trace data file '", data_path_.string(), "': reading iteration ", t,
                         ", worker ", worker, " at byte ", offset + static_cast<std::int64_t>(done),
                         " failed: ", r < 0 ? std::strerror(errno) : "unexpected end of file"));
    done += static_cast<std::size_t>(r);
  }
  if constexpr (std::endian::native == std::endian::big) {
    for (auto& v : grad)
      v = std::bit_cast<float>(__builtin_bswap32(std::bit_cast<std::uint32_t>(v)));
  }
}

TraceWriter::TraceWriter(const fs::path& dir, std::int64_t n_g, int workers)
    : dir_(dir), n_g_(n_g), workers_(workers) {
  EXDYNA_CHECK_ARG(n_g > 0 && n_g <= kTraceMaxNg, "trace n_g ", n_g,
                   " is not valid; expected 1..2^32-1");
  EXDYNA_CHECK_ARG(workers >= 1 && workers <= kTraceMaxWorkers, "trace workers ", workers,
                   " is not valid; expected 1..65536");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw InvalidArgument(
        detail::concat("trace directory '", dir.string(), "' cannot be created: ", ec.message()));
  // An old meta.json must not describe the new, partly written data.
  fs::remove(dir / kMeta, ec);
  out_.open(dir / kData, std::ios::binary | std::ios::trunc);
  if (!out_)
    throw InvalidArgument(
        detail::concat("trace data file '", (dir / kData).string(), "' cannot be written"));
}

void TraceWriter::append(std::span<const float> grad) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(grad.size()) == n_g_, "trace writer: gradient has ",
                   grad.size(), " elements, expected n_g = ", n_g_);
  if constexpr (std::endian::native == std::endian::little) {
    out_.write(reinterpret_cast<const char*>(grad.data()),
               static_cast<std::streamsize>(grad.size_bytes()));
  } else {
    std::vector<std::uint32_t> le(grad.size());
    for (std::size_t i = 0; i < grad.size(); ++i)
      le[i] = __builtin_bswap32(std::bit_cast<std::uint32_t>(grad[i]));
    out_.write(reinterpret_cast<const char*>(le.data()),
               static_cast<std::streamsize>(grad.size_bytes()));
  }
  if (!out_)
    throw DataError(
        detail::concat("trace data file '", (dir_ / kData).string(), "': write failed"));
  ++appended_;
}

void TraceWriter::finish() {
  EXDYNA_CHECK_ARG(appended_ % workers_ == 0, "trace writer: ", appended_,
                   " gradients appended, not a multiple of ", workers_,
                   " workers; expected whole iterations");
  EXDYNA_CHECK_ARG(appended_ > 0,
                   "trace writer: nothing appended; expected at least one iteration");
  out_.flush();
  out_.close();
  if (!out_)
    throw DataError(
        detail::concat("trace data file '", (dir_ / kData).string(), "': write failed"));
  write_trace_meta(dir_, {n_g_, workers_, appended_ / workers_});
}

void write_trace(const fs::path& dir, GradientSource& src, int workers, std::int64_t iterations) {
  EXDYNA_CHECK_ARG(iterations >= 1, "trace iterations ", iterations,
                   " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(src.iterations() < 0 || iterations <= src.iterations(), "trace: ", iterations,
                   " iterations asked, the source has ", src.iterations());
  TraceWriter w(dir, src.n_g(), workers);
  std::vector<float> g(static_cast<std::size_t>(src.n_g()));
  for (std::int64_t t = 0; t < iterations; ++t)
    for (int r = 0; r < workers; ++r) {
      src.fill(t, r, g);
      w.append(g);
    }
  w.finish();
}

}  // namespace exdyna::sim
