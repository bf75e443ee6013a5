#include "exdyna/sim/trace_format.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "exdyna/core/atomic_file.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::sim {

namespace fs = std::filesystem;

namespace {

// A positive integer field of meta.json, at most `max`.
std::int64_t positive_field(const nlohmann::json& j, const char* key, const fs::path& path,
                            std::int64_t max) {
  if (!j.contains(key))
    throw DataError(detail::concat(path.string(), ": field \"", key,
                                   "\" is missing; expected a positive integer"));
  const auto& v = j.at(key);
  if (!v.is_number_integer())
    throw DataError(detail::concat(path.string(), ": field \"", key, "\" is ", v.dump(),
                                   "; expected a positive integer"));
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u == 0 || u > static_cast<std::uint64_t>(max))
      throw DataError(
          detail::concat(path.string(), ": field \"", key, "\" is ", u, "; expected 1..", max));
    return static_cast<std::int64_t>(u);
  }
  const auto s = v.get<std::int64_t>();
  if (s <= 0 || s > max)
    throw DataError(
        detail::concat(path.string(), ": field \"", key, "\" is ", s, "; expected 1..", max));
  return s;
}

}  // namespace

TraceMeta read_trace_meta(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InvalidArgument(detail::concat("trace directory '", dir.string(),
                                         "' does not exist or is not a directory"));
  const fs::path path = dir / kTraceMetaFile;
  std::ifstream in(path);
  if (!in)
    throw InvalidArgument(detail::concat(
        "trace meta file '", path.string(), "' cannot be opened: ", std::strerror(errno),
        "; expected {\"n_g\": N, \"workers\": W, \"iterations\": T}"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(detail::concat(path.string(), " is not valid JSON (", e.what(),
                                   "); expected {\"n_g\": N, \"workers\": W, \"iterations\": T}"));
  }
  if (!j.is_object())
    throw DataError(
        detail::concat(path.string(), " holds ", j.type_name(),
                       "; expected an object {\"n_g\": N, \"workers\": W, \"iterations\": T}"));
  TraceMeta m;
  m.n_g = positive_field(j, "n_g", path, kTraceMaxNg);
  m.workers = static_cast<int>(positive_field(j, "workers", path, kTraceMaxWorkers));
  m.iterations = positive_field(j, "iterations", path, std::numeric_limits<std::int64_t>::max());
  // The byte size must fit in 63 bits.
  const auto limit = static_cast<unsigned __int128>(std::numeric_limits<std::int64_t>::max());
  if (static_cast<unsigned __int128>(m.iterations) * static_cast<unsigned>(m.workers) *
          static_cast<std::uint64_t>(m.n_g) * 4u >
      limit)
    throw DataError(detail::concat(path.string(), ": iterations ", m.iterations, " x workers ",
                                   m.workers, " x n_g ", m.n_g,
                                   " x 4 bytes overflows; expected a trace under 2^63 bytes"));
  return m;
}

void write_trace_meta(const fs::path& dir, const TraceMeta& m) {
  const nlohmann::json j = {{"n_g", m.n_g}, {"workers", m.workers}, {"iterations", m.iterations}};
  // Atomic, so a reader never sees a half-written meta.json; a failure stays a DataError.
  try {
    core::write_file_atomic(dir / kTraceMetaFile, j.dump() + "\n");
  } catch (const DataError&) {
    throw;
  } catch (const Error& e) {
    throw DataError(detail::concat("trace meta file '", (dir / kTraceMetaFile).string(),
                                   "': write failed: ", e.what()));
  }
}

}  // namespace exdyna::sim
