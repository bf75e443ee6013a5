// Recorded gradients as a GradientSource, and a writer for them. The format (a directory with
// meta.json and grads.f32) is described in trace_format.hpp. TraceSource reads each
// (t, w) with pread when asked, so traces larger than memory work and workers (threads or
// processes) read concurrently. Problems are reported at open time where possible, as DataError
// (malformed content) or InvalidArgument (missing paths), naming the file and the value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>

#include "exdyna/sim/gradient_source.hpp"
#include "exdyna/sim/trace_format.hpp"

namespace exdyna::sim {

class TraceSource final : public GradientSource {
 public:
  // Opens dir, checks meta.json and that grads.f32 has exactly the size meta.json implies.
  explicit TraceSource(const std::filesystem::path& dir);
  ~TraceSource() override;
  TraceSource(const TraceSource&) = delete;
  TraceSource& operator=(const TraceSource&) = delete;

  std::int64_t n_g() const override { return meta_.n_g; }
  std::int64_t iterations() const override { return meta_.iterations; }
  int workers() const override { return meta_.workers; }
  // Thread-safe (pread). Values are copied as stored; non-finite ones are the caller's to refuse
  // (error feedback does, naming the element).
  void fill(std::int64_t t, int worker, std::span<float> grad) override;

  const TraceMeta& meta() const { return meta_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_, data_path_;
  TraceMeta meta_;
  int fd_ = -1;
};

// Writes a trace in order: append() exactly iterations * workers gradients, iteration-major
// (t = 0: workers 0..W-1, t = 1: ...), then finish(). meta.json is written by finish(), last, so a
// trace whose writing failed half-way has no meta.json and is refused by TraceSource.
class TraceWriter {
 public:
  TraceWriter(const std::filesystem::path& dir, std::int64_t n_g, int workers);
  void append(std::span<const float> grad);
  // Writes meta.json with the number of complete iterations appended; throws if a partial
  // iteration was appended.
  void finish();

 private:
  std::filesystem::path dir_;
  std::int64_t n_g_;
  int workers_;
  std::int64_t appended_ = 0;
  std::ofstream out_;
};

// Records `iterations` iterations of `workers` workers from src into dir.
void write_trace(const std::filesystem::path& dir, GradientSource& src, int workers,
                 std::int64_t iterations);

}  // namespace exdyna::sim
