// device_kernels.hpp: the workspace, device memory, copies, and the update kernels of error
// feedback (gather, scatter_update, dense_update). The passes over the gradient live beside their
// CPU counterparts: reductions.cu, selection.cu, partition.cu.
#include <cuda_runtime.h>

#include <limits>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/core/device_workspace.cuh"

namespace exdyna::core::device {

bool built() {
  return true;
}

bool available() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  return n > 0;
}

Workspace::Workspace() : impl_(std::make_unique<Impl>()) {}
Workspace::~Workspace() {
  if (impl_->t_begin) cudaEventDestroy(impl_->t_begin);
  if (impl_->t_end) cudaEventDestroy(impl_->t_end);
}
void Workspace::set_stream(void* s) {
  impl_->stream = static_cast<cudaStream_t>(s);
}
void* Workspace::stream() const {
  return impl_->stream;
}

void Workspace::set_timing(bool on) {
  if (on && !impl_->t_begin) {
    EXDYNA_CUDA(cudaEventCreate(&impl_->t_begin));
    EXDYNA_CUDA(cudaEventCreate(&impl_->t_end));
  }
  impl_->timing = on;
  impl_->timed = false;
}

double Workspace::last_device_us() const {
  if (!impl_->timed) return -1;
  EXDYNA_CUDA(cudaEventSynchronize(impl_->t_end));
  float ms = 0;
  EXDYNA_CUDA(cudaEventElapsedTime(&ms, impl_->t_begin, impl_->t_end));
  return 1000.0 * static_cast<double>(ms);
}

void* device_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  EXDYNA_CUDA(cudaMalloc(&p, bytes));
  return p;
}

void device_free(void* p) noexcept {
  if (p) cudaFree(p);
}

void copy_to_host(Workspace& ws, void* h_dst, const void* d_src, std::size_t bytes) {
  if (bytes == 0) return;
  auto& w = ws.impl();
  EXDYNA_CUDA(cudaMemcpyAsync(h_dst, d_src, bytes, cudaMemcpyDeviceToHost, w.stream));
  w.sync();
}

void copy_to_device(Workspace& ws, void* d_dst, const void* h_src, std::size_t bytes) {
  if (bytes == 0) return;
  auto& w = ws.impl();
  EXDYNA_CUDA(cudaMemcpyAsync(d_dst, h_src, bytes, cudaMemcpyHostToDevice, w.stream));
  w.sync();
}

namespace {

constexpr int kThreads = 256;

__global__ void gather_kernel(const float* __restrict__ x, const std::uint32_t* __restrict__ idx,
                              std::uint64_t m, std::uint64_t n, float* __restrict__ out) {
  for (std::uint64_t j = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; j < m;
       j += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    out[j] = idx[j] < n ? x[idx[j]] : 0.0f;  // n: the padding's index and past it read 0
}

// skip: a resident step's flag (the ranks whose gradient was not finite; > 0: nothing scattered),
// or none.
__global__ void scatter_kernel(float* __restrict__ grad, float* __restrict__ residual,
                               const std::uint32_t* __restrict__ idx,
                               const float* __restrict__ sums, std::uint64_t m, std::uint64_t n,
                               float scale, const float* __restrict__ skip) {
  if (skip != nullptr && *skip > 0.0f) return;
  for (std::uint64_t j = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; j < m;
       j += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t i = idx[j];
    if (i >= n) continue;  // the padding of a resident step's list
    grad[i] = sums[j] * scale;
    residual[i] = 0.0f;
  }
}

template <bool kVec>
__global__ void dense_kernel(float* __restrict__ grad, float* __restrict__ residual,
                             const float* __restrict__ sums, std::uint64_t n, float scale) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  if constexpr (kVec) {
    const std::uint64_t nv = n / 4;
    const auto* s4 = reinterpret_cast<const float4*>(sums);
    auto* g4 = reinterpret_cast<float4*>(grad);
    auto* r4 = reinterpret_cast<float4*>(residual);
    for (std::uint64_t v = t; v < nv; v += stride) {
      const float4 s = s4[v];
      g4[v] = make_float4(s.x * scale, s.y * scale, s.z * scale, s.w * scale);
      r4[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (std::uint64_t i = 4 * nv + t; i < n; i += stride) {
      grad[i] = sums[i] * scale;
      residual[i] = 0.0f;
    }
  } else {
    for (std::uint64_t i = t; i < n; i += stride) {
      grad[i] = sums[i] * scale;
      residual[i] = 0.0f;
    }
  }
}

// non_finite = skip, some rank's gradient not finite (rare): the accumulate undone, the update NaN.
__global__ void undo_skip_kernel(float* __restrict__ grad, float* __restrict__ residual,
                                 std::uint64_t n) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const float r = residual[i], g = grad[i];
    if (isfinite(r + g)) residual[i] = r - g;
    grad[i] = __int_as_float(0x7fc00000);  // quiet NaN
  }
}

// resident_update's first pass: every element (the update's zeros, or the skip's undo and NaN);
// scatter_kernel then writes the list's sums unless skipped.
__global__ void resident_clear_kernel(float* __restrict__ grad, float* __restrict__ residual,
                                      std::uint64_t n, const float* __restrict__ flag) {
  const bool skip = *flag > 0.0f;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    if (!skip) {
      grad[i] = 0.0f;
      continue;
    }
    const float r = residual[i], g = grad[i];
    if (isfinite(r + g)) residual[i] = r - g;
    grad[i] = __int_as_float(0x7fc00000);  // quiet NaN
  }
}

}  // namespace

void resident_update(Workspace& ws, float* d_grad, float* d_residual, std::int64_t n,
                     const std::uint32_t* d_idx, const float* d_sums, std::int64_t m, float scale,
                     const float* d_flag) {
  check_size(n, "resident_update");
  check_size(m, "resident_update");
  auto& w = ws.impl();
  TimedCall timed(w);
  if (n > 0) {
    const unsigned blocks = grid_for(w, static_cast<std::uint64_t>(n), kThreads, 8);
    EXDYNA_CUDA_LAUNCH("resident_update",
                       resident_clear_kernel<<<blocks, kThreads, 0, w.stream>>>(
                           d_grad, d_residual, static_cast<std::uint64_t>(n), d_flag));
  }
  if (m > 0) {
    const unsigned blocks = grid_for(w, static_cast<std::uint64_t>(m), kThreads, 16);
    EXDYNA_CUDA_LAUNCH("resident_update",
                       scatter_kernel<<<blocks, kThreads, 0, w.stream>>>(
                           d_grad, d_residual, d_idx, d_sums, static_cast<std::uint64_t>(m),
                           static_cast<std::uint64_t>(n), scale, d_flag));
  }
  w.kernels_done();
}

void undo_accumulate_and_poison(Workspace& ws, float* d_grad, float* d_residual, std::int64_t n) {
  check_size(n, "undo_accumulate_and_poison");
  if (n == 0) return;
  auto& w = ws.impl();
  TimedCall timed(w);
  const unsigned blocks = grid_for(w, static_cast<std::uint64_t>(n), kThreads, 8);
  EXDYNA_CUDA_LAUNCH("undo_accumulate_and_poison",
                     undo_skip_kernel<<<blocks, kThreads, 0, w.stream>>>(
                         d_grad, d_residual, static_cast<std::uint64_t>(n)));
  w.kernels_done();
}

void gather(Workspace& ws, const float* d_x, const std::uint32_t* d_idx, std::int64_t m,
            float* d_out) {
  // Every index below n_max: the plain gather.
  gather_listed(ws, d_x, std::numeric_limits<std::int64_t>::max(), d_idx, m, d_out);
}

void gather_listed(Workspace& ws, const float* d_x, std::int64_t n, const std::uint32_t* d_idx,
                   std::int64_t m, float* d_out) {
  check_size(n, "gather_listed");
  check_size(m, "gather_listed");
  if (m == 0) return;
  auto& w = ws.impl();
  TimedCall timed(w);
  const unsigned blocks = grid_for(w, static_cast<std::uint64_t>(m), kThreads, 16);
  EXDYNA_CUDA_LAUNCH("gather_listed", gather_kernel<<<blocks, kThreads, 0, w.stream>>>(
                                          d_x, d_idx, static_cast<std::uint64_t>(m),
                                          static_cast<std::uint64_t>(n), d_out));
  w.kernels_done();
}

void scatter_update(Workspace& ws, float* d_grad, float* d_residual, std::int64_t n,
                    const std::uint32_t* d_idx, const float* d_sums, std::int64_t m, float scale) {
  check_size(n, "scatter_update");
  check_size(m, "scatter_update");
  auto& w = ws.impl();
  TimedCall timed(w);
  if (n > 0)
    EXDYNA_CUDA(cudaMemsetAsync(d_grad, 0, static_cast<std::size_t>(n) * sizeof(float), w.stream));
  if (m == 0) return w.kernels_done();
  const unsigned blocks = grid_for(w, static_cast<std::uint64_t>(m), kThreads, 16);
  EXDYNA_CUDA_LAUNCH("scatter_update",
                     scatter_kernel<<<blocks, kThreads, 0, w.stream>>>(
                         d_grad, d_residual, d_idx, d_sums, static_cast<std::uint64_t>(m),
                         static_cast<std::uint64_t>(n), scale, nullptr));
  w.kernels_done();
}

void dense_update(Workspace& ws, float* d_grad, float* d_residual, const float* d_sums,
                  std::int64_t n, float scale) {
  check_size(n, "dense_update");
  if (n == 0) return;
  auto& w = ws.impl();
  TimedCall timed(w);
  const auto un = static_cast<std::uint64_t>(n);
  const unsigned blocks = grid_for(w, un / 4 + 1, kThreads, 8);
  if (aligned16(d_grad) && aligned16(d_residual) && aligned16(d_sums))
    EXDYNA_CUDA_LAUNCH("dense_update", dense_kernel<true>
                       <<<blocks, kThreads, 0, w.stream>>>(d_grad, d_residual, d_sums, un, scale));
  else
    EXDYNA_CUDA_LAUNCH("dense_update", dense_kernel<false>
                       <<<blocks, kThreads, 0, w.stream>>>(d_grad, d_residual, d_sums, un, scale));
  w.kernels_done();
}

}  // namespace exdyna::core::device
