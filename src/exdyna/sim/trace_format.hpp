// The trace format, shared by its reader (trace_source) and its writers (TraceWriter in
// trace_source, trace_recorder).
//
// A trace is a directory holding
//   meta.json  {"n_g": N, "workers": W, "iterations": T}   (positive integers; other keys ignored)
//   grads.f32  raw little-endian float32, laid out [iteration][worker][n_g], exactly T*W*N*4 bytes
// Worker w's gradient of iteration t starts at byte ((t * W + w) * N) * 4. meta.json is written
// last, so a directory without it is an unfinished trace (and is refused).
#pragma once

#include <cstdint>
#include <filesystem>

namespace exdyna::sim {

// The two files of a trace directory.
inline constexpr const char* kTraceMetaFile = "meta.json";
inline constexpr const char* kTraceDataFile = "grads.f32";
// Limits of meta.json's fields: indices travel as 32-bit integers.
inline constexpr std::int64_t kTraceMaxNg = (std::int64_t{1} << 32) - 1;
inline constexpr int kTraceMaxWorkers = 1 << 16;

struct TraceMeta {
  std::int64_t n_g = 0;
  int workers = 0;
  std::int64_t iterations = 0;
  // The size grads.f32 must have: iterations * workers * n_g * 4.
  std::int64_t data_bytes() const { return iterations * workers * n_g * 4; }
  // Byte offset of worker w's gradient of iteration t in grads.f32.
  std::int64_t offset(std::int64_t t, int w) const { return (t * workers + w) * n_g * 4; }
};

// Parses and checks dir/meta.json: InvalidArgument when the directory or the file is missing,
// DataError (naming the file and the field) when its content is malformed or out of range.
TraceMeta read_trace_meta(const std::filesystem::path& dir);

// Writes dir/meta.json atomically (temporary file + rename).
void write_trace_meta(const std::filesystem::path& dir, const TraceMeta& m);

}  // namespace exdyna::sim
