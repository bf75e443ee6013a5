// device_kernels.hpp: core::accumulate, core::max_abs and the sum of squares on the device
// (reductions.cpp's and step_clipping.cpp's counterparts). One read pass each (accumulate also
// writes acc), float4 where the pointers allow, grid-stride over one wave of blocks. accumulate's
// sum is deterministic for a given device: each thread sums in double in a fixed order, each block
// reduces in a fixed tree, and the host adds the blocks' partial sums in block order.
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/core/device_rules.hpp"
#include "exdyna/core/device_workspace.cuh"

namespace exdyna::core::device {

namespace {

constexpr int kThreads = 256;
constexpr unsigned long long kNone = ~0ull;

// Reduction operators (cub::Min / cub::Max are gone from CCCL 3).
struct MinOp {
  template <typename T>
  __device__ __forceinline__ T operator()(const T& a, const T& b) const {
    return b < a ? b : a;
  }
};
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
};

__device__ __forceinline__ bool not_finite(float v) {
  return (rules::bits_of(v) & 0x7f800000u) == 0x7f800000u;
}

// One element: acc = e + g stored (e kept where that is not finite), e^2 added (in float, as the
// CPU squares), the first bad index kept (elements come in increasing order per thread).
template <bool kSq>
__device__ __forceinline__ void acc_one(float e, float g, float& a, std::uint64_t i, float& sq,
                                        unsigned long long& bad) {
  a = e + g;
  if constexpr (kSq) sq += e * e;
  if (not_finite(a) || not_finite(g)) {
    if (bad == kNone) bad = i;
    a = e;  // as on the CPU: a non-finite sum leaves the residual as it was
  }
}

template <bool kVec, bool kSq>
__global__ __launch_bounds__(kThreads) void accumulate_kernel(
    float* __restrict__ r, const float* __restrict__ g, std::uint64_t n,
    unsigned long long* __restrict__ bad_out, double* __restrict__ partials) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  double sq = 0;
  unsigned long long bad = kNone;
  std::uint64_t tail_from = 0;
  if constexpr (kVec) {
    const std::uint64_t nv = n / 4;
    auto* r4 = reinterpret_cast<float4*>(r);
    const auto* g4 = reinterpret_cast<const float4*>(g);
    std::uint64_t v = t;
    // Two vectors per iteration, both loaded before either is used (more loads in flight).
    for (; v + stride < nv; v += 2 * stride) {
      const float4 e0 = r4[v], g0 = g4[v];
      const float4 e1 = r4[v + stride], g1 = g4[v + stride];
      float4 a0, a1;
      float s0 = 0, s1 = 0;
      acc_one<kSq>(e0.x, g0.x, a0.x, 4 * v, s0, bad);
      acc_one<kSq>(e0.y, g0.y, a0.y, 4 * v + 1, s0, bad);
      acc_one<kSq>(e0.z, g0.z, a0.z, 4 * v + 2, s0, bad);
      acc_one<kSq>(e0.w, g0.w, a0.w, 4 * v + 3, s0, bad);
      acc_one<kSq>(e1.x, g1.x, a1.x, 4 * (v + stride), s1, bad);
      acc_one<kSq>(e1.y, g1.y, a1.y, 4 * (v + stride) + 1, s1, bad);
      acc_one<kSq>(e1.z, g1.z, a1.z, 4 * (v + stride) + 2, s1, bad);
      acc_one<kSq>(e1.w, g1.w, a1.w, 4 * (v + stride) + 3, s1, bad);
      r4[v] = a0;
      r4[v + stride] = a1;
      if constexpr (kSq) sq += static_cast<double>(s0) + static_cast<double>(s1);
    }
    for (; v < nv; v += stride) {
      const float4 e0 = r4[v], g0 = g4[v];
      float4 a0;
      float s0 = 0;
      acc_one<kSq>(e0.x, g0.x, a0.x, 4 * v, s0, bad);
      acc_one<kSq>(e0.y, g0.y, a0.y, 4 * v + 1, s0, bad);
      acc_one<kSq>(e0.z, g0.z, a0.z, 4 * v + 2, s0, bad);
      acc_one<kSq>(e0.w, g0.w, a0.w, 4 * v + 3, s0, bad);
      r4[v] = a0;
      if constexpr (kSq) sq += static_cast<double>(s0);
    }
    tail_from = 4 * nv;
  }
  // The scalar path (or the last n % 4 elements): indices above every vector's, so `bad` stays
  // the smallest this thread saw.
  for (std::uint64_t i = tail_from + t; i < n; i += stride) {
    float a, s = 0;
    acc_one<kSq>(r[i], g[i], a, i, s, bad);
    r[i] = a;
    if constexpr (kSq) sq += static_cast<double>(s);
  }
  // The block's bad index: the smallest of its threads'.
  using ReduceU = cub::BlockReduce<unsigned long long, kThreads>;
  using ReduceD = cub::BlockReduce<double, kThreads>;
  __shared__ union {
    typename ReduceU::TempStorage u;
    typename ReduceD::TempStorage d;
  } tmp;
  const unsigned long long block_bad = ReduceU(tmp.u).Reduce(bad, MinOp());
  if (threadIdx.x == 0 && block_bad != kNone) atomicMin(bad_out, block_bad);
  if constexpr (kSq) {
    __syncthreads();
    const double block_sq = ReduceD(tmp.d).Sum(sq);
    if (threadIdx.x == 0) partials[blockIdx.x] = block_sq;
  }
}

template <bool kVec>
__global__ __launch_bounds__(kThreads) void max_abs_kernel(const float* __restrict__ x,
                                                           std::uint64_t n,
                                                           unsigned int* __restrict__ out) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  std::uint32_t m = 0;
  std::uint64_t tail_from = 0;
  if constexpr (kVec) {
    const std::uint64_t nv = n / 4;
    const auto* x4 = reinterpret_cast<const float4*>(x);
    for (std::uint64_t v = t; v < nv; v += stride) {
      const float4 a = x4[v];
      m = max(m, max(max(rules::abs_bits(a.x), rules::abs_bits(a.y)),
                     max(rules::abs_bits(a.z), rules::abs_bits(a.w))));
    }
    tail_from = 4 * nv;
  }
  for (std::uint64_t i = tail_from + t; i < n; i += stride) m = max(m, rules::abs_bits(x[i]));
  using Reduce = cub::BlockReduce<std::uint32_t, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const std::uint32_t block_max = Reduce(tmp).Reduce(m, MaxOp());
  if (threadIdx.x == 0 && block_max != 0) atomicMax(out, static_cast<unsigned int>(block_max));
}

template <bool kVec>
__global__ __launch_bounds__(kThreads) void sum_squares_kernel(const float* __restrict__ x,
                                                               std::uint64_t n,
                                                               double* __restrict__ partials) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  double sq = 0;
  std::uint64_t tail_from = 0;
  if constexpr (kVec) {
    const std::uint64_t nv = n / 4;
    const auto* x4 = reinterpret_cast<const float4*>(x);
    for (std::uint64_t v = t; v < nv; v += stride) {
      const float4 a = x4[v];
      sq += static_cast<double>(a.x) * a.x + static_cast<double>(a.y) * a.y +
            static_cast<double>(a.z) * a.z + static_cast<double>(a.w) * a.w;
    }
    tail_from = 4 * nv;
  }
  for (std::uint64_t i = tail_from + t; i < n; i += stride) sq += static_cast<double>(x[i]) * x[i];
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const double block_sq = Reduce(tmp).Sum(sq);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_sq;
}

}  // namespace

AccumulateResult accumulate(Workspace& ws, float* d_residual, const float* d_grad, std::int64_t n,
                            bool want_sq) {
  check_size(n, "accumulate");
  AccumulateResult res;
  if (n == 0) return res;
  auto& w = ws.impl();
  TimedCall timed(w);
  const auto un = static_cast<std::uint64_t>(n);
  const unsigned blocks = grid_for(w, un / 4 + 1, kThreads, 8);
  // small: [bad index][blocks partial sums]
  auto* d_small = w.small.as<unsigned long long>(1 + blocks);
  auto* d_bad = d_small;
  auto* d_partials = reinterpret_cast<double*>(d_small + 1);
  EXDYNA_CUDA(cudaMemsetAsync(d_bad, 0xff, sizeof(unsigned long long), w.stream));
  const bool vec = aligned16(d_residual) && aligned16(d_grad);
  auto launch = [&](auto kernel) {
    EXDYNA_CUDA_LAUNCH("accumulate", kernel<<<blocks, kThreads, 0, w.stream>>>(
                                         d_residual, d_grad, un, d_bad, d_partials));
  };
  if (vec)
    want_sq ? launch(accumulate_kernel<true, true>) : launch(accumulate_kernel<true, false>);
  else
    want_sq ? launch(accumulate_kernel<false, true>) : launch(accumulate_kernel<false, false>);
  w.kernels_done();
  const std::size_t words = want_sq ? 1 + blocks : 1;
  auto* h = w.host.as<unsigned long long>(words);
  EXDYNA_CUDA(cudaMemcpyAsync(h, d_small, words * sizeof(unsigned long long),
                              cudaMemcpyDeviceToHost, w.stream));
  w.sync();
  res.first_bad = h[0] == kNone ? -1 : static_cast<std::int64_t>(h[0]);
  if (want_sq) {
    const auto* partials = reinterpret_cast<const double*>(h + 1);
    double sq = 0;
    for (unsigned b = 0; b < blocks; ++b) sq += partials[b];
    res.residual_sq = sq;
  }
  return res;
}

namespace {

__global__ void bad_flag_kernel(const unsigned long long* bad, float* flag) {
  *flag = *bad != kNone ? 1.0f : 0.0f;
}

}  // namespace

void accumulate_async(Workspace& ws, float* d_residual, const float* d_grad, std::int64_t n,
                      unsigned long long* d_bad, float* d_flag) {
  check_size(n, "accumulate_async");
  auto& w = ws.impl();
  TimedCall timed(w);
  EXDYNA_CUDA(cudaMemsetAsync(d_bad, 0xff, sizeof(unsigned long long), w.stream));
  if (n > 0) {
    const auto un = static_cast<std::uint64_t>(n);
    const unsigned blocks = grid_for(w, un / 4 + 1, kThreads, 8);
    if (aligned16(d_residual) && aligned16(d_grad))
      EXDYNA_CUDA_LAUNCH(
          "accumulate_async", accumulate_kernel<true, false>
          <<<blocks, kThreads, 0, w.stream>>>(d_residual, d_grad, un, d_bad, nullptr));
    else
      EXDYNA_CUDA_LAUNCH(
          "accumulate_async", accumulate_kernel<false, false>
          <<<blocks, kThreads, 0, w.stream>>>(d_residual, d_grad, un, d_bad, nullptr));
  }
  if (d_flag != nullptr)
    EXDYNA_CUDA_LAUNCH("bad_flag_kernel", bad_flag_kernel<<<1, 1, 0, w.stream>>>(d_bad, d_flag));
  w.kernels_done();
}

float max_abs(Workspace& ws, const float* d_x, std::int64_t n) {
  check_size(n, "max_abs");
  if (n == 0) return 0.0f;
  auto& w = ws.impl();
  TimedCall timed(w);
  const auto un = static_cast<std::uint64_t>(n);
  const unsigned blocks = grid_for(w, un / 4 + 1, kThreads, 8);
  auto* d_max = w.small.as<unsigned int>(1);
  EXDYNA_CUDA(cudaMemsetAsync(d_max, 0, sizeof(unsigned int), w.stream));
  if (aligned16(d_x))
    EXDYNA_CUDA_LAUNCH("max_abs",
                       max_abs_kernel<true><<<blocks, kThreads, 0, w.stream>>>(d_x, un, d_max));
  else
    EXDYNA_CUDA_LAUNCH("max_abs",
                       max_abs_kernel<false><<<blocks, kThreads, 0, w.stream>>>(d_x, un, d_max));
  w.kernels_done();
  auto* h = w.host.as<unsigned int>(1);
  EXDYNA_CUDA(cudaMemcpyAsync(h, d_max, sizeof(unsigned int), cudaMemcpyDeviceToHost, w.stream));
  w.sync();
  return rules::float_of(h[0]);
}

double sum_squares(Workspace& ws, const float* d_x, std::int64_t n) {
  check_size(n, "sum_squares");
  if (n == 0) return 0.0;
  auto& w = ws.impl();
  TimedCall timed(w);
  const auto un = static_cast<std::uint64_t>(n);
  const unsigned blocks = grid_for(w, un / 4 + 1, kThreads, 8);
  auto* d_partials = w.small.as<double>(blocks);
  if (aligned16(d_x))
    EXDYNA_CUDA_LAUNCH("sum_squares", sum_squares_kernel<true>
                       <<<blocks, kThreads, 0, w.stream>>>(d_x, un, d_partials));
  else
    EXDYNA_CUDA_LAUNCH("sum_squares", sum_squares_kernel<false>
                       <<<blocks, kThreads, 0, w.stream>>>(d_x, un, d_partials));
  w.kernels_done();
  auto* h = w.host.as<double>(blocks);
  EXDYNA_CUDA(
      cudaMemcpyAsync(h, d_partials, blocks * sizeof(double), cudaMemcpyDeviceToHost, w.stream));
  w.sync();
  double sq = 0;  // the blocks' partial sums in block order: the same sum every run
  for (unsigned b = 0; b < blocks; ++b) sq += h[b];
  return sq;
}

}  // namespace exdyna::core::device
