// The CUDA kernels every sparsifier's GPU path uses: the workspace, device memory and copies, error
// feedback's accumulate and update, and max_abs; the same decisions as the CPU code of
// core/reductions.hpp on the same input (the per-element rules are shared, core/device_rules.hpp).
// ExDyna's own passes (selection, the ladder, the cut, the per-block counts) are declared in
// sparsifiers/exdyna/device_kernels.hpp over this workspace. Only small counts cross to the host;
// the gradient, the indices and the values stay on the device.
//
// Plain C++: no CUDA header here. The definitions are in the .cu files beside their CPU
// counterparts (core/device_kernels.cu, core/reductions.cu, sparsifiers/exdyna/selection.cu,
// sparsifiers/exdyna/partition.cu), built into the library exdyna_cuda_kernels only where nvcc is
// found (cmake/exdyna_cuda.cmake, EXDYNA_CUDA_BUILT); there is no fallback implementation: link
// this only where it is built.
//
// Every call enqueues on the workspace's stream; the calls that return a count or fill host
// arrays synchronize that stream before returning. Errors throw exdyna::Error naming the CUDA call
// and cudaGetErrorString; arguments the CPU code refuses throw exdyna::InvalidArgument as the CPU
// code does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace exdyna::core::device {

bool built();      // true in the CUDA build
bool available();  // a CUDA device is present (never throws)

// Scratch kept across steps (temporary device storage, tile counts, pinned host words); grows,
// never shrinks. `stream` (a cudaStream_t as void*; nullptr = the legacy default stream) is where
// every call enqueues. Not thread-safe: one workspace per thread (or per stream).
class Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void set_stream(void* s);
  void* stream() const;

  // For benchmarks: when on, every call records CUDA events on its stream around its own device
  // work (from before its first kernel or memset to after its last kernel; not the copy of its
  // result to the host nor the host's wait), and last_device_us() reads the last call's. Off by
  // default (no events recorded).
  void set_timing(bool on);
  double last_device_us() const;  // -1 when nothing was timed

  struct Impl;  // device_workspace.cuh
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// cudaMalloc / cudaFree (device_free never throws); nullptr for 0 bytes.
void* device_alloc(std::size_t bytes);
void device_free(void* p) noexcept;

// Device memory of n elements of T (cudaMalloc; freed in the destructor). resize keeps nothing
// and reallocates only when growing; size() is the last size asked for.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t n) { resize(n); }
  ~Buffer() { device_free(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      device_free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  void resize(std::size_t n) {
    if (n > capacity_) {
      device_free(data_);
      data_ = nullptr;
      capacity_ = 0;
      data_ = static_cast<T*>(device_alloc(n * sizeof(T)));
      capacity_ = n;
    }
    size_ = n;
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// Synchronous on the workspace's stream (enqueued there, then the stream is synchronized).
void copy_to_host(Workspace&, void* h_dst, const void* d_src, std::size_t bytes);
void copy_to_device(Workspace&, void* d_dst, const void* h_src, std::size_t bytes);

// core::accumulate: residual += grad in place (acc lives in residual). residual_sq: the sum of the
// squares of the residual BEFORE adding (core::accumulate's residual_sq; summed in double, in
// another order than the CPU's, so equal to rounding only) when want_sq, else 0. first_bad: the
// smallest i where grad[i] or the sum is not finite (-1: all finite; core::accumulate's
// finite == (first_bad < 0)); an element whose sum is not finite keeps its residual, as there.
// Synchronizes.
struct AccumulateResult {
  double residual_sq = 0;
  std::int64_t first_bad = -1;
};
AccumulateResult accumulate(Workspace&, float* d_residual, const float* d_grad, std::int64_t n,
                            bool want_sq);

// accumulate without a readback (a resident step): residual += grad as accumulate does, the
// smallest non-finite index into *d_bad (all ones: none), and, where d_flag is given, *d_flag =
// 1.0f if there was one, else 0.0f (for the all-reduce that tells every rank). Enqueued only.
void accumulate_async(Workspace&, float* d_residual, const float* d_grad, std::int64_t n,
                      unsigned long long* d_bad, float* d_flag);

// core::max_abs: the largest |x| as the unsigned max of the sign-cleared bits (0 for n = 0; a NaN
// wins over every number, as on the CPU). Synchronizes.
float max_abs(Workspace&, const float* d_x, std::int64_t n);

// The sum of x[i]^2, each square and the sum in double (step_clip_scale's, summed in another
// order: equal to rounding only; deterministic for a given device). Synchronizes.
double sum_squares(Workspace&, const float* d_x, std::int64_t n);

// out[j] = x[idx[j]] for j < m.
void gather(Workspace&, const float* d_x, const std::uint32_t* d_idx, std::int64_t m, float* d_out);
// The same over a resident step's list (x of n values): out[j] = 0 where idx[j] >= n (its padding).
void gather_listed(Workspace&, const float* d_x, std::int64_t n, const std::uint32_t* d_idx,
                   std::int64_t m, float* d_out);

// Error feedback's sparse update: grad = 0 except grad[idx[j]] = sums[j] * scale, and
// residual[idx[j]] = 0 (the indices distinct, as the gathered selection is; an index at or past n,
// a resident step's padding, is skipped).
void scatter_update(Workspace&, float* d_grad, float* d_residual, std::int64_t n,
                    const std::uint32_t* d_idx, const float* d_sums, std::int64_t m, float scale);

// non_finite = skip when some rank's gradient was not finite (sparsifiers/non_finite_step.hpp):
// residual[i] -= grad[i] where residual[i] + grad[i] is finite (undoes accumulate, which kept the
// residual where the sum was not), and grad = NaN.
void undo_accumulate_and_poison(Workspace&, float* d_grad, float* d_residual, std::int64_t n);

// A resident step's update, decided on the device by *d_flag (the all-reduced count of ranks
// whose gradient was not finite): 0, scatter_update over the padded list; more, what
// undo_accumulate_and_poison does (non_finite = skip). Enqueued only.
void resident_update(Workspace&, float* d_grad, float* d_residual, std::int64_t n,
                     const std::uint32_t* d_idx, const float* d_sums, std::int64_t m, float scale,
                     const float* d_flag);

// The dense case: grad[i] = sums[i] * scale; residual[i] = 0.
void dense_update(Workspace&, float* d_grad, float* d_residual, const float* d_sums, std::int64_t n,
                  float scale);

}  // namespace exdyna::core::device
