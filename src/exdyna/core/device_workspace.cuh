// The CUDA side of device_kernels.hpp shared by its .cu files: the workspace's scratch, the error
// check, and small launch helpers. Included only by .cu files (nvcc).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/core/error.hpp"

// Throws exdyna::Error naming the call and CUDA's message.
#define EXDYNA_CUDA(call)                                                                  \
  do {                                                                                     \
    const cudaError_t exdyna_err_ = (call);                                                \
    if (exdyna_err_ != cudaSuccess)                                                        \
      throw ::exdyna::Error(::exdyna::detail::concat("CUDA call ", #call, " failed: ",     \
                                                     cudaGetErrorString(exdyna_err_),      \
                                                     " (", __FILE__, ":", __LINE__, ")")); \
  } while (0)

// A kernel launch, then the launch's own error (bad configuration, no device image), naming it.
#define EXDYNA_CUDA_LAUNCH(name, ...)                                                          \
  do {                                                                                         \
    __VA_ARGS__;                                                                               \
    const cudaError_t exdyna_err_ = cudaGetLastError();                                        \
    if (exdyna_err_ != cudaSuccess)                                                            \
      throw ::exdyna::Error(::exdyna::detail::concat("CUDA kernel launch ", name, " failed: ", \
                                                     cudaGetErrorString(exdyna_err_), " (",    \
                                                     __FILE__, ":", __LINE__, ")"));           \
  } while (0)

namespace exdyna::core::device {

// Raw device or pinned host scratch that grows, never shrinks; the contents are not kept.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch() { device_free(p_); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  void* get(std::size_t bytes) {
    if (bytes > cap_) {
      device_free(p_);
      p_ = nullptr;
      cap_ = 0;
      // Rounded up: a few sizes in turn do not reallocate every time.
      const std::size_t want = bytes + bytes / 8 + 256;
      p_ = device_alloc(want);
      cap_ = want;
    }
    return p_;
  }
  template <typename T>
  T* as(std::size_t count) {
    return static_cast<T*>(get(count * sizeof(T)));
  }

 private:
  void* p_ = nullptr;
  std::size_t cap_ = 0;
};

class PinnedScratch {
 public:
  PinnedScratch() = default;
  ~PinnedScratch() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedScratch(const PinnedScratch&) = delete;
  PinnedScratch& operator=(const PinnedScratch&) = delete;
  void* get(std::size_t bytes) {
    if (bytes > cap_) {
      if (p_) cudaFreeHost(p_);
      p_ = nullptr;
      cap_ = 0;
      const std::size_t want = bytes < 4096 ? 4096 : bytes + bytes / 8;
      EXDYNA_CUDA(cudaMallocHost(&p_, want));
      cap_ = want;
    }
    return p_;
  }
  template <typename T>
  T* as(std::size_t count) {
    return static_cast<T*>(get(count * sizeof(T)));
  }

 private:
  void* p_ = nullptr;
  std::size_t cap_ = 0;
};

struct Workspace::Impl {
  cudaStream_t stream = nullptr;
  int sm_count = 0;  // of the current device, read once
  // Separate scratch per use, so that one call's buffers never alias each other.
  DeviceScratch tiles;    // the compaction's per-tile entries (uint16 each)
  DeviceScratch counts;   // per-tile counts and prefixes
  DeviceScratch small;    // counters, bins, sub-bins, partial sums
  DeviceScratch plan;     // the exact controller's plan: decoded ladders and its scratch
  DeviceScratch cut;      // a cut's rule and need where only the device knows them
  DeviceScratch pack;     // the fused slot's pack: ladder, candidates, sort keys
  PinnedScratch host;     // what comes back to the host

  int sms() {
    if (sm_count == 0) {
      int dev = 0;
      EXDYNA_CUDA(cudaGetDevice(&dev));
      EXDYNA_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));
      if (sm_count < 1) sm_count = 1;
    }
    return sm_count;
  }
  void sync() { EXDYNA_CUDA(cudaStreamSynchronize(stream)); }

  // Workspace::set_timing: the events of the last call (TimedCall records the start, every
  // kernels_done() the end; the last one recorded counts).
  bool timing = false;
  bool timed = false;
  cudaEvent_t t_begin = nullptr, t_end = nullptr;
  void kernels_done() {
    if (timing) EXDYNA_CUDA(cudaEventRecord(t_end, stream));
  }
};

// At the top of every public call (after its argument checks).
class TimedCall {
 public:
  explicit TimedCall(Workspace::Impl& w) {
    w.timed = false;
    if (w.timing) {
      EXDYNA_CUDA(cudaEventRecord(w.t_begin, w.stream));
      EXDYNA_CUDA(cudaEventRecord(w.t_end, w.stream));  // a call with no kernel: 0
      w.timed = true;
    }
  }
};

// Blocks for a grid-stride pass over `work` items of `per_block` items per block, at most a few
// waves of the device.
inline unsigned grid_for(Workspace::Impl& w, std::uint64_t work, std::uint64_t per_block,
                         unsigned waves = 8) {
  std::uint64_t b = (work + per_block - 1) / per_block;
  const std::uint64_t cap = static_cast<std::uint64_t>(w.sms()) * waves;
  if (b > cap) b = cap;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

inline void check_size(std::int64_t n, const char* what) {
  EXDYNA_CHECK_ARG(n >= 0, what, ": ", n, " elements; expected >= 0");
}

}  // namespace exdyna::core::device
