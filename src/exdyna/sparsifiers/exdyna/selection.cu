// device_kernels.hpp: the selection passes of selection.cpp and ladder_cut.cpp on the device:
// select_threshold, the ladder's count pass (ladder_count) and the exact controller's own cut
// (take_cut). The per-element decisions are device_rules.hpp's, shared with the CPU tests.
//
// Ordered compaction (select_threshold, take_cut), in three kernels and one read of the values:
//   1. compact_tiles: one block per tile of 4,096 values (4 rounds of 1,024: thread t reads values
//      4t..4t+3 of each round, float4 where aligned, all four rounds' loads issued first). Each
//      value's class comes from the rule; one block scan of the four rounds' counts (packed into
//      16-bit fields of a 64-bit word) gives every kept value its rank in the tile, and the tile's
//      kept values are written, in order, as 16-bit entries (position in the tile, bit 15 set for
//      the cut's ranked class) into the tile's own slice of a scratch array; the tile's counts go
//      to an array of counts.
//   2. scan_tiles: one block scans the tiles' counts (a few thousand) into each tile's place in
//      the output and the total.
//   3. emit_tiles: one block per tile copies its entries, as offset + position, to its place.
// The scratch writes are about the selected fraction of the values (1 % at d = 0.01), so the pass
// moves about the bytes of one read. The cut's ranked class (the values of sub-bin `last` of bin
// `rung`, of which only the first last_need in index order are kept) is resolved in steps 2-3:
// each tile takes q_t = clamp(last_need - ranked values of the tiles before it, 0, its own).
//
// The ladder's bins and the cut's 256 sub-bins: a histogram in shared memory (one copy per warp),
// added to 64-bit device counters once per block, copied to the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <limits>

#include "exdyna/core/device_workspace.cuh"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_rules.hpp"
#include "exdyna/sparsifiers/exdyna/device_wire.hpp"

namespace exdyna::sparsifiers::device {

// The workspace and its helpers (core/device_workspace.cuh).
using namespace core::device;  // NOLINT(google-build-using-namespace)

namespace {

constexpr int kTileThreads = 256;
constexpr int kRounds = 4;
constexpr int kRound = 4 * kTileThreads;  // 1,024 values per round
constexpr int kTile = kRounds * kRound;   // 4,096 values per tile
constexpr std::uint16_t kRankedBit = 0x8000;
constexpr std::uint16_t kPosMask = 0x0fff;
constexpr int kScanThreads = 1024;
constexpr int kScanItems = 4;
constexpr int kHistThreads = 256;
constexpr int kHistCopies = kHistThreads / 32;  // one per warp

struct SelectRule {
  float thr;
  __device__ __forceinline__ std::uint8_t operator()(float v) const {
    return rules::passes(v, thr) ? rules::kCutKeep : rules::kCutDrop;
  }
};

struct CutClassRule {
  rules::CutRule cut;
  __device__ __forceinline__ std::uint8_t operator()(float v) const {
    return rules::cut_class(v, cut);
  }
};

// The cut's rules where the device alone knows the rung and sub-bin (take_cut_async): read from
// device memory, written there by the kernels before.
struct CutClassRuleAt {
  const rules::CutRule* cut;
  __device__ __forceinline__ std::uint8_t operator()(float v) const {
    return rules::cut_class(v, *cut);
  }
};

struct SubBinRuleAt {
  const rules::CutRule* cut;
  __device__ __forceinline__ int operator()(float v) const { return rules::cut_sub_bin(v, *cut); }
};

struct LadderBinRule {
  rules::GridRule grid;
  __device__ __forceinline__ int operator()(float v) const { return rules::ladder_bin(v, grid); }
};

struct SubBinRule {
  rules::CutRule cut;
  __device__ __forceinline__ int operator()(float v) const { return rules::cut_sub_bin(v, cut); }
};

__device__ __forceinline__ float nan_value() {
  return __uint_as_float(0x7fc00000u);
}

template <bool kVec, bool kRanked, typename Rule>
__global__ __launch_bounds__(kTileThreads) void compact_tiles(
    const float* __restrict__ part, std::uint64_t n, Rule rule, std::uint16_t* __restrict__ entries,
    std::uint32_t* __restrict__ tile_all, std::uint32_t* __restrict__ tile_ranked) {
  const std::uint64_t base = static_cast<std::uint64_t>(blockIdx.x) * kTile;
  const int lane0 = 4 * static_cast<int>(threadIdx.x);
  float v[kRounds][4];
#pragma unroll
  for (int j = 0; j < kRounds; ++j) {
    const std::uint64_t e = base + static_cast<std::uint64_t>(j * kRound + lane0);
    if (kVec && e + 4 <= n) {
      const float4 f = *reinterpret_cast<const float4*>(part + e);
      v[j][0] = f.x;
      v[j][1] = f.y;
      v[j][2] = f.z;
      v[j][3] = f.w;
    } else {
#pragma unroll
      for (int l = 0; l < 4; ++l) v[j][l] = e + l < n ? part[e + l] : nan_value();  // NaN: dropped
    }
  }
  std::uint8_t cls[kRounds][4];
  unsigned long long packed = 0;
  unsigned ranked = 0;
#pragma unroll
  for (int j = 0; j < kRounds; ++j) {
    unsigned cnt = 0;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      cls[j][l] = rule(v[j][l]);
      cnt += cls[j][l] != rules::kCutDrop;
      if constexpr (kRanked) ranked += cls[j][l] == rules::kCutRanked;
    }
    packed |= static_cast<unsigned long long>(cnt) << (16 * j);  // a round holds <= 1,024
  }
  using Scan = cub::BlockScan<unsigned long long, kTileThreads>;
  using Reduce = cub::BlockReduce<unsigned, kTileThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } tmp;
  unsigned long long before, total;
  Scan(tmp.scan).ExclusiveSum(packed, before, total);
  std::uint16_t* out = entries + base;
  unsigned round_base = 0;
#pragma unroll
  for (int j = 0; j < kRounds; ++j) {
    unsigned pos = round_base + static_cast<unsigned>((before >> (16 * j)) & 0xffffu);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (cls[j][l] != rules::kCutDrop) {
        out[pos++] = static_cast<std::uint16_t>((j * kRound + lane0 + l) |
                                                (cls[j][l] == rules::kCutRanked ? kRankedBit : 0));
      }
    }
    round_base += static_cast<unsigned>((total >> (16 * j)) & 0xffffu);
  }
  if (threadIdx.x == 0) tile_all[blockIdx.x] = round_base;
  if constexpr (kRanked) {
    __syncthreads();  // tmp is reused
    const unsigned r = Reduce(tmp.reduce).Sum(ranked);
    if (threadIdx.x == 0) tile_ranked[blockIdx.x] = r;
  }
}

// One block: prefix[t] = the kept values of the tiles before t; *total = all kept. Ranked: tile t
// keeps all its values but the ranked ones, and q_t = clamp(need - ranked before t, 0, ranked[t])
// of those (written over tile_ranked[t]).
template <bool kRanked>
__global__ __launch_bounds__(kScanThreads) void scan_tiles(
    const std::uint32_t* __restrict__ tile_all, std::uint32_t* __restrict__ tile_ranked,
    std::uint32_t* __restrict__ prefix, std::uint64_t tiles, long long need,
    const long long* __restrict__ need_at, std::uint32_t* __restrict__ total) {
  using Scan = cub::BlockScan<unsigned long long, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  unsigned long long carry_kept = 0, carry_ranked = 0;
  for (std::uint64_t chunk = 0; chunk < tiles; chunk += kScanThreads * kScanItems) {
    const std::uint64_t t0 = chunk + static_cast<std::uint64_t>(threadIdx.x) * kScanItems;
    unsigned long long kept[kScanItems];
    unsigned long long q[kScanItems];
    if constexpr (kRanked) {
      unsigned long long rk[kScanItems];
      unsigned long long mine = 0;
#pragma unroll
      for (int i = 0; i < kScanItems; ++i) {
        rk[i] = t0 + i < tiles ? tile_ranked[t0 + i] : 0;
        mine += rk[i];
      }
      unsigned long long before, agg;
      Scan(tmp).ExclusiveSum(mine, before, agg);
      __syncthreads();
      // The need only the device knows (take_cut_async), else the host's.
      const long long wanted = need_at != nullptr ? *need_at : need;
      long long a = static_cast<long long>(carry_ranked + before);  // ranked values before t
#pragma unroll
      for (int i = 0; i < kScanItems; ++i) {
        const long long left = wanted - a;
        const long long take =
            left <= 0
                ? 0
                : (left < static_cast<long long>(rk[i]) ? left : static_cast<long long>(rk[i]));
        q[i] = static_cast<unsigned long long>(take);
        const unsigned long long all = t0 + i < tiles ? tile_all[t0 + i] : 0;
        kept[i] = all - rk[i] + q[i];
        a += static_cast<long long>(rk[i]);
      }
      carry_ranked += agg;
    } else {
#pragma unroll
      for (int i = 0; i < kScanItems; ++i) {
        kept[i] = t0 + i < tiles ? tile_all[t0 + i] : 0;
        q[i] = 0;
      }
    }
    unsigned long long mine = 0;
#pragma unroll
    for (int i = 0; i < kScanItems; ++i) mine += kept[i];
    unsigned long long before, agg;
    Scan(tmp).ExclusiveSum(mine, before, agg);
    __syncthreads();
    unsigned long long p = carry_kept + before;
#pragma unroll
    for (int i = 0; i < kScanItems; ++i) {
      if (t0 + i < tiles) {
        prefix[t0 + i] = static_cast<std::uint32_t>(p);
        if constexpr (kRanked) tile_ranked[t0 + i] = static_cast<std::uint32_t>(q[i]);
      }
      p += kept[i];
    }
    carry_kept += agg;
  }
  if (threadIdx.x == 0) *total = static_cast<std::uint32_t>(carry_kept);
}

template <bool kRanked>
__global__ __launch_bounds__(kTileThreads) void emit_tiles(
    const std::uint16_t* __restrict__ entries, const std::uint32_t* __restrict__ tile_all,
    const std::uint32_t* __restrict__ tile_q, const std::uint32_t* __restrict__ prefix,
    std::uint32_t offset, std::uint32_t* __restrict__ out) {
  const std::uint32_t c = tile_all[blockIdx.x];
  if (c == 0) return;
  const std::uint16_t* e = entries + static_cast<std::uint64_t>(blockIdx.x) * kTile;
  std::uint32_t* o = out + prefix[blockIdx.x];
  // offset + i in uint32 arithmetic, as the CPU writes offset + static_cast<uint32_t>(i).
  const std::uint32_t first =
      offset + static_cast<std::uint32_t>(static_cast<std::uint64_t>(blockIdx.x) * kTile);
  if constexpr (!kRanked) {
    for (std::uint32_t j = threadIdx.x; j < c; j += kTileThreads) o[j] = first + (e[j] & kPosMask);
  } else {
    using Scan = cub::BlockScan<unsigned long long, kTileThreads>;
    __shared__ typename Scan::TempStorage tmp;
    const std::uint32_t q = tile_q[blockIdx.x];
    std::uint32_t carry1 = 0, carry2 = 0;
    for (std::uint32_t j0 = 0; j0 < c; j0 += kTileThreads) {
      const std::uint32_t j = j0 + threadIdx.x;
      const bool valid = j < c;
      const std::uint16_t word = valid ? e[j] : 0;
      const bool is2 = valid && (word & kRankedBit) != 0;
      const bool is1 = valid && !is2;
      const unsigned long long mine = (is1 ? 1ull : 0ull) | (is2 ? (1ull << 32) : 0ull);
      unsigned long long before, agg;
      Scan(tmp).ExclusiveSum(mine, before, agg);
      __syncthreads();
      const std::uint32_t b1 = carry1 + static_cast<std::uint32_t>(before & 0xffffffffu);
      const std::uint32_t b2 = carry2 + static_cast<std::uint32_t>(before >> 32);
      const std::uint32_t idx = first + (word & kPosMask);
      if (is1) o[b1 + (b2 < q ? b2 : q)] = idx;
      if (is2 && b2 < q) o[b1 + b2] = idx;
      carry1 += static_cast<std::uint32_t>(agg & 0xffffffffu);
      carry2 += static_cast<std::uint32_t>(agg >> 32);
    }
  }
}

template <bool kVec, typename BinRule>
__global__ __launch_bounds__(kHistThreads) void histogram_kernel(
    const float* __restrict__ part, std::uint64_t n, BinRule rule, int nbins,
    unsigned long long* __restrict__ out) {
  extern __shared__ unsigned int hist[];  // kHistCopies * nbins
  for (int i = threadIdx.x; i < kHistCopies * nbins; i += kHistThreads) hist[i] = 0;
  __syncthreads();
  unsigned int* mine = hist + (threadIdx.x / 32) * nbins;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t t = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  std::uint64_t tail_from = 0;
  if constexpr (kVec) {
    const std::uint64_t nv = n / 4;
    const auto* p4 = reinterpret_cast<const float4*>(part);
    for (std::uint64_t v = t; v < nv; v += stride) {
      const float4 f = p4[v];
      const int b0 = rule(f.x), b1 = rule(f.y), b2 = rule(f.z), b3 = rule(f.w);
      if (b0 >= 0) atomicAdd(mine + b0, 1u);
      if (b1 >= 0) atomicAdd(mine + b1, 1u);
      if (b2 >= 0) atomicAdd(mine + b2, 1u);
      if (b3 >= 0) atomicAdd(mine + b3, 1u);
    }
    tail_from = 4 * nv;
  }
  for (std::uint64_t i = tail_from + t; i < n; i += stride) {
    const int b = rule(part[i]);
    if (b >= 0) atomicAdd(mine + b, 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < nbins; b += kHistThreads) {
    unsigned long long s = 0;
#pragma unroll
    for (int c = 0; c < kHistCopies; ++c) s += hist[c * nbins + b];
    if (s != 0) atomicAdd(out + b, s);
  }
}

// check_grid of selection.cpp: the grids the CPU passes accept.
void check_grid(const LadderGrid& grid) {
  EXDYNA_CHECK_ARG(
      grid.rungs >= 2 && grid.rungs <= 257 && grid.mant_bits >= 0 && grid.mant_bits <= 10,
      "ladder of ", grid.rungs, " rungs with ", grid.mant_bits,
      " mantissa bits is not valid; expected 2..257 rungs and 0..10 bits");
}

void check_part(std::int64_t n, const char* what) {
  EXDYNA_CHECK_ARG(
      n >= 0 && n <= static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()), what,
      ": a partition of ", n, " values; expected 0..2^32-1");
}

// The histogram of `rule` over part into d_bins (nbins device counters, overwritten), enqueued.
template <typename BinRule>
void histogram_enqueue(Workspace::Impl& w, const float* d_part, std::uint64_t n, BinRule rule,
                       int nbins, unsigned long long* d_bins) {
  EXDYNA_CUDA(cudaMemsetAsync(d_bins, 0, sizeof(unsigned long long) * nbins, w.stream));
  if (n > 0) {
    const unsigned blocks = grid_for(w, n / 4 + 1, kHistThreads, 8);
    const std::size_t shmem = sizeof(unsigned int) * kHistCopies * static_cast<std::size_t>(nbins);
    if (aligned16(d_part))
      EXDYNA_CUDA_LAUNCH(
          "histogram", histogram_kernel<true, BinRule>
          <<<blocks, kHistThreads, shmem, w.stream>>>(d_part, n, rule, nbins, d_bins));
    else
      EXDYNA_CUDA_LAUNCH(
          "histogram", histogram_kernel<false, BinRule>
          <<<blocks, kHistThreads, shmem, w.stream>>>(d_part, n, rule, nbins, d_bins));
  }
}

// The histogram into h_counts (nbins host entries, overwritten); returns their sum. Synchronizes.
template <typename BinRule>
std::uint64_t histogram(Workspace::Impl& w, const float* d_part, std::uint64_t n, BinRule rule,
                        int nbins, std::uint64_t* h_counts) {
  auto* d_bins = w.small.as<unsigned long long>(static_cast<std::size_t>(nbins));
  histogram_enqueue(w, d_part, n, rule, nbins, d_bins);
  w.kernels_done();
  auto* h = w.host.as<unsigned long long>(static_cast<std::size_t>(nbins));
  EXDYNA_CUDA(cudaMemcpyAsync(h, d_bins, sizeof(unsigned long long) * nbins, cudaMemcpyDeviceToHost,
                              w.stream));
  w.sync();
  std::uint64_t sum = 0;
  for (int b = 0; b < nbins; ++b) {
    h_counts[b] = h[b];
    sum += h[b];
  }
  return sum;
}

// The ordered compaction (see the top of this file) of part by `rule` into d_out, enqueued; `need`
// (or *d_need where given): how many of the ranked class to keep (kRanked); the count into
// *d_total. n >= 1.
template <bool kRanked, typename Rule>
void compact_enqueue(Workspace::Impl& w, const float* d_part, std::uint64_t n, Rule rule,
                     std::int64_t need, const long long* d_need, std::uint32_t offset,
                     std::uint32_t* d_out, std::uint32_t* d_total) {
  const std::uint64_t tiles = (n + kTile - 1) / kTile;
  auto* entries = w.tiles.as<std::uint16_t>(tiles * kTile);
  auto* counts = w.counts.as<std::uint32_t>(3 * tiles);
  std::uint32_t* tile_all = counts;
  std::uint32_t* tile_ranked = counts + tiles;
  std::uint32_t* prefix = counts + 2 * tiles;
  const auto grid = static_cast<unsigned>(tiles);
  if (aligned16(d_part))
    EXDYNA_CUDA_LAUNCH(
        "compact_tiles", compact_tiles<true, kRanked, Rule>
        <<<grid, kTileThreads, 0, w.stream>>>(d_part, n, rule, entries, tile_all, tile_ranked));
  else
    EXDYNA_CUDA_LAUNCH(
        "compact_tiles", compact_tiles<false, kRanked, Rule>
        <<<grid, kTileThreads, 0, w.stream>>>(d_part, n, rule, entries, tile_all, tile_ranked));
  EXDYNA_CUDA_LAUNCH("scan_tiles", scan_tiles<kRanked><<<1, kScanThreads, 0, w.stream>>>(
                                       tile_all, tile_ranked, prefix, tiles,
                                       static_cast<long long>(need), d_need, d_total));
  EXDYNA_CUDA_LAUNCH("emit_tiles", emit_tiles<kRanked><<<grid, kTileThreads, 0, w.stream>>>(
                                       entries, tile_all, tile_ranked, prefix, offset, d_out));
}

// The compaction with its count brought back. Synchronizes.
template <bool kRanked, typename Rule>
std::int64_t compact(Workspace::Impl& w, const float* d_part, std::uint64_t n, Rule rule,
                     std::int64_t need, std::uint32_t offset, std::uint32_t* d_out) {
  if (n == 0) return 0;
  auto* d_total = w.small.as<std::uint32_t>(1);
  compact_enqueue<kRanked>(w, d_part, n, rule, need, nullptr, offset, d_out, d_total);
  w.kernels_done();
  auto* h = w.host.as<std::uint32_t>(1);
  EXDYNA_CUDA(cudaMemcpyAsync(h, d_total, sizeof(std::uint32_t), cudaMemcpyDeviceToHost, w.stream));
  w.sync();
  return static_cast<std::int64_t>(h[0]);
}

// ladder_count_async's bins as int64 (the wire's and the plan's type) and their sum.
__global__ void ladder_total_kernel(const unsigned long long* hist, int rungs, std::int64_t* bins,
                                    std::int64_t* count) {
  std::int64_t sum = 0;
  for (int j = 0; j < rungs; ++j) sum += bins[j] = static_cast<std::int64_t>(hist[j]);
  *count = sum;
}

// take_cut_async, before its sub-bin histogram: the cut's rule from the rung in device memory,
// or a rule that keeps nothing where take_cut would throw.
__global__ void cut_rule_kernel(std::uint32_t lo_key, int mant_bits, int rungs,
                                const std::int64_t* rung_quota, rules::CutRule* rule,
                                std::int64_t* status) {
  const std::int64_t rung = rung_quota[0], quota = rung_quota[1];
  const bool ok = rung >= 0 && rung < rungs && quota >= 0;
  *rule = rules::cut_rule_at(lo_key, mant_bits, rungs, ok ? static_cast<int>(rung) : 0);
  if (!ok) rule->at_least = nan_value();  // NaN: no value is at least it
  *status = ok ? rules::kPlanOk : rules::kCutRungBad;
}

// After it: the sub-bin of the quota-th largest (find_sub_cut) and how many of it are kept.
__global__ void sub_cut_kernel(const unsigned long long* sub, const std::int64_t* rung_quota,
                               rules::CutRule* rule, long long* need, std::int64_t* status) {
  *need = 0;
  if (*status != rules::kPlanOk) return;
  const std::int64_t quota = rung_quota[1];
  std::int64_t in_bin = 0;
  for (std::uint32_t i = 0; i <= rule->sub_mask; ++i) in_bin += static_cast<std::int64_t>(sub[i]);
  if (quota > in_bin) {
    *status = rules::kCutQuotaBad;
    rule->at_least = nan_value();
    return;
  }
  const rules::SubCut sc = rules::sub_cut(sub, rule->sub_mask, quota);
  rule->last = sc.last;
  *need = sc.last_need;
}

}  // namespace

std::int64_t select_threshold(Workspace& ws, const float* d_part, std::int64_t n, float thr,
                              std::uint32_t offset, std::uint32_t* d_out) {
  check_part(n, "select_threshold");
  TimedCall timed(ws.impl());
  return compact<false>(ws.impl(), d_part, static_cast<std::uint64_t>(n), SelectRule{thr}, 0,
                        offset, d_out);
}

std::int64_t ladder_count(Workspace& ws, const float* d_part, std::int64_t n,
                          const LadderGrid& grid, std::int64_t* h_bins) {
  check_grid(grid);
  check_part(n, "ladder_count");
  TimedCall timed(ws.impl());
  std::uint64_t counts[257];
  const std::uint64_t total =
      histogram(ws.impl(), d_part, static_cast<std::uint64_t>(n),
                LadderBinRule{rules::make_grid_rule(grid)}, grid.rungs, counts);
  for (int j = 0; j < grid.rungs; ++j) h_bins[j] += static_cast<std::int64_t>(counts[j]);
  return static_cast<std::int64_t>(total);
}

std::int64_t take_cut(Workspace& ws, const float* d_part, std::int64_t n, std::uint32_t offset,
                      const LadderGrid& grid, int rung, std::int64_t quota, std::uint32_t* d_out) {
  check_grid(grid);
  check_part(n, "take_cut");
  // check_cut of ladder_cut.cpp.
  EXDYNA_CHECK_ARG(rung >= 0 && rung < grid.rungs, "ladder cut at rung ", rung, "; expected 0..",
                   grid.rungs - 1);
  EXDYNA_CHECK_ARG(quota >= 0, "ladder cut quota ", quota, "; expected >= 0");
  auto& w = ws.impl();
  TimedCall timed(w);
  rules::CutRule cut = rules::make_cut_rule(grid, rung);
  const int nsub = static_cast<int>(cut.sub_mask + 1);
  std::uint64_t sub[256];
  const std::uint64_t in_bin =
      histogram(w, d_part, static_cast<std::uint64_t>(n), SubBinRule{cut}, nsub, sub);
  // find_sub_cut of ladder_cut.cpp.
  EXDYNA_CHECK_ARG(quota <= static_cast<std::int64_t>(in_bin), "ladder cut quota ", quota,
                   " exceeds the ", in_bin, " values of bin ", rung);
  const rules::SubCut sc = rules::sub_cut(sub, cut.sub_mask, quota);
  cut.last = sc.last;
  return compact<true>(w, d_part, static_cast<std::uint64_t>(n), CutClassRule{cut}, sc.last_need,
                       offset, d_out);
}

void ladder_count_async(Workspace& ws, const float* d_part, std::int64_t n, const LadderGrid& grid,
                        std::int64_t* d_bins, std::int64_t* d_count) {
  check_grid(grid);
  check_part(n, "ladder_count_async");
  auto& w = ws.impl();
  TimedCall timed(w);
  auto* d_hist = w.small.as<unsigned long long>(static_cast<std::size_t>(grid.rungs));
  histogram_enqueue(w, d_part, static_cast<std::uint64_t>(n),
                    LadderBinRule{rules::make_grid_rule(grid)}, grid.rungs, d_hist);
  EXDYNA_CUDA_LAUNCH("ladder_total_kernel", ladder_total_kernel<<<1, 1, 0, w.stream>>>(
                                                d_hist, grid.rungs, d_bins, d_count));
  w.kernels_done();
}

void take_cut_async(Workspace& ws, const float* d_part, std::int64_t n, std::uint32_t offset,
                    const LadderGrid& grid, const std::int64_t* d_rung_quota, std::uint32_t* d_out,
                    std::uint32_t* d_kept, std::int64_t* d_status) {
  check_grid(grid);
  check_part(n, "take_cut_async");
  auto& w = ws.impl();
  TimedCall timed(w);
  // The rule and the need where the kernels write them; the sub-bins' count from the grid alone.
  auto* scratch = static_cast<char*>(w.cut.get(sizeof(rules::CutRule) + 64));
  auto* d_rule = reinterpret_cast<rules::CutRule*>(scratch);
  auto* d_need = reinterpret_cast<long long*>(scratch + ((sizeof(rules::CutRule) + 15) / 16) * 16);
  const int nsub = static_cast<int>(rules::make_cut_rule(grid, 0).sub_mask + 1);
  auto* d_sub = w.small.as<unsigned long long>(static_cast<std::size_t>(nsub));
  EXDYNA_CUDA_LAUNCH("cut_rule_kernel",
                     cut_rule_kernel<<<1, 1, 0, w.stream>>>(grid.lo_key, grid.mant_bits, grid.rungs,
                                                            d_rung_quota, d_rule, d_status));
  histogram_enqueue(w, d_part, static_cast<std::uint64_t>(n), SubBinRuleAt{d_rule}, nsub, d_sub);
  EXDYNA_CUDA_LAUNCH("sub_cut_kernel", sub_cut_kernel<<<1, 1, 0, w.stream>>>(
                                           d_sub, d_rung_quota, d_rule, d_need, d_status));
  if (n == 0)
    EXDYNA_CUDA(cudaMemsetAsync(d_kept, 0, sizeof(std::uint32_t), w.stream));
  else
    compact_enqueue<true>(w, d_part, static_cast<std::uint64_t>(n), CutClassRuleAt{d_rule}, 0,
                          d_need, offset, d_out, d_kept);
  w.kernels_done();
}

}  // namespace exdyna::sparsifiers::device
