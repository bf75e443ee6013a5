// exdyna_cuda_bench: the device kernels (core/ and sparsifiers/exdyna/device_kernels.hpp) against
// the device-to-device copy of the same bytes, printed as one JSON object (to stdout, or to the
// file named by argv[1]).
//   exdyna_cuda_bench [OUT.json] [--sizes N,N,...] [--reps R]
// For each gradient size n (default 25M and 100M float32 values, Gaussian):
//   copy_full: cudaMemcpyAsync device to device of n * 4 bytes; bytes = 2 * n * 4 (read + write).
//   copy_part: the same for one worker's partition of 8 (n / 8 values).
//   accumulate: residual += grad over n values with the sum of squares (bytes = 3 * n * 4: two
//     reads, one write); ratio against copy_full's GB/s.
//   select_threshold: on the partition (n / 8 values, aligned, offset 0) with a threshold that
//     passes about 1 % (the 99th percentile of |x| in a 100,000-value host sample); bytes = the
//     partition's n / 8 * 4 read + 4 per selected index written; ratio against copy_part.
//   ladder_count: the ladder's count pass on the partition (16 rungs per octave, 129 rungs, rung 64
//     at that threshold: the paper-mode ladder); bytes = the partition read once.
//   take_cut: the exact controller's cut of the partition at its own 1 % (own_cut of those bins:
//     the bin holding the k-th largest and the quota of it); bytes = the partition read twice (the
//     sub-bin pass and the compaction) + the indices written.
// Every time is the median of --reps (default 20) calls after 3 warm-up calls, measured with CUDA
// events recorded on the workspace's stream around the call. The calls that return a count
// synchronize inside (they copy it to the host), so their event time includes that copy and the
// host's turn-around before the stop event is enqueued: the cost one call has in a step. wall_us
// is the same call timed on the host clock. gbps = bytes / time; ratio = gbps / the copy's gbps.
// device_us (device_gbps, device_ratio): the call's own device work only, from
// Workspace::set_timing's events (from its first kernel or memset to its last kernel: without the
// copy of the count to the host and the host's wait; take_cut's includes its mid-call round trip
// for the sub-bin counts).
// Exit 77 when no CUDA device is present.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "exdyna/core/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/device_kernels.hpp"
#include "exdyna/sparsifiers/exdyna/ladder_cut.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace core = exdyna::core;
namespace sparsifiers = exdyna::sparsifiers;
// The device kernels: core's (workspace, buffers, reductions, updates) and ExDyna's (selection,
// ladder, cut, blocks).
namespace dev {
using namespace exdyna::core::device;         // NOLINT(google-build-using-namespace)
using namespace exdyna::sparsifiers::device;  // NOLINT(google-build-using-namespace)
}  // namespace dev

namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "exdyna_cuda_bench: %s failed: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Timing {
  double us = 0;          // median, CUDA events
  double wall_us = 0;     // median, host clock
  double device_us = -1;  // median of Workspace::last_device_us (-1: not a kernel call)
};

Timing time_it(dev::Workspace& ws, int reps, const std::function<void()>& call) {
  auto stream = static_cast<cudaStream_t>(ws.stream());
  cudaEvent_t a, b;
  cuda_ok(cudaEventCreate(&a), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) call();
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<double> ev, wall, device;
  for (int i = 0; i < reps; ++i) {
    ws.set_timing(true);  // forgets the last call's events: a copy reports no device_us
    const auto t0 = std::chrono::steady_clock::now();
    cuda_ok(cudaEventRecord(a, stream), "cudaEventRecord");
    call();
    cuda_ok(cudaEventRecord(b, stream), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    const auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    ev.push_back(1000.0 * ms);
    wall.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    const double d = ws.last_device_us();
    if (d >= 0) device.push_back(d);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  };
  return {median(ev), median(wall), device.empty() ? -1.0 : median(device)};
}

std::string entry(const Timing& t, double bytes, double ref_gbps, const std::string& extra = "") {
  const double gbps = bytes / (t.us * 1e3);
  std::ostringstream o;
  o.precision(6);
  o << "{\"us\": " << t.us << ", \"wall_us\": " << t.wall_us << ", \"bytes\": " << bytes
    << ", \"gbps\": " << gbps;
  if (ref_gbps > 0) o << ", \"ratio\": " << gbps / ref_gbps;
  if (t.device_us > 0) {
    const double dg = bytes / (t.device_us * 1e3);
    o << ", \"device_us\": " << t.device_us << ", \"device_gbps\": " << dg;
    if (ref_gbps > 0) o << ", \"device_ratio\": " << dg / ref_gbps;
  }
  o << extra << "}";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  std::vector<long long> sizes = {25'000'000, 100'000'000};
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: exdyna_cuda_bench [OUT.json] [--sizes N,N,...] [--reps R]\n"
          "Times the device kernels against a device-to-device copy; prints JSON.\n"
          "Exit 77 when no CUDA device is present.\n");
      return 0;
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      std::stringstream ss(argv[++i]);
      std::string tok;
      while (std::getline(ss, tok, ',')) sizes.push_back(std::stoll(tok));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (!a.empty() && a[0] != '-' && out_path.empty()) {
      out_path = a;
    } else {
      std::fprintf(stderr, "exdyna_cuda_bench: unknown argument %s (try --help)\n", a.c_str());
      return 2;
    }
  }
  if (!dev::available()) {
    std::fprintf(stderr, "exdyna_cuda_bench: no CUDA device: skipped (exit 77)\n");
    return 77;
  }
  try {
    int device = 0;
    cuda_ok(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    cuda_ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    cudaStream_t stream;
    cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    dev::Workspace ws;
    ws.set_stream(stream);
    ws.set_timing(true);

    std::ostringstream json;
    json << "{\n  \"device\": \"" << prop.name << "\",\n  \"sms\": " << prop.multiProcessorCount
         << ",\n  \"reps\": " << reps << ",\n  \"sizes\": [";
    std::mt19937_64 rng(7);
    bool first = true;
    for (const long long n_ll : sizes) {
      const auto n = static_cast<std::size_t>(n_ll);
      const std::size_t p = n / 8;  // one worker's partition of 8
      std::fprintf(stderr, "exdyna_cuda_bench: n = %zu\n", n);
      std::vector<float> h(n);
      std::normal_distribution<float> d(0.0f, 1e-3f);
      for (auto& v : h) v = d(rng);
      dev::Buffer<float> x(n), g(n), y(n);
      dev::Buffer<std::uint32_t> out(p + 1);
      dev::copy_to_device(ws, x.data(), h.data(), n * 4);
      std::vector<float> hg(n);
      for (auto& v : hg) v = 1e-6f * d(rng);
      dev::copy_to_device(ws, g.data(), hg.data(), n * 4);

      // Threshold: the 99th percentile of |x| in a sample of the partition.
      std::vector<float> sample;
      std::uniform_int_distribution<std::size_t> pos(0, p - 1);
      for (int i = 0; i < 100'000; ++i) sample.push_back(std::fabs(h[pos(rng)]));
      std::sort(sample.begin(), sample.end());
      const float thr = sample[sample.size() * 99 / 100];

      const Timing copy_full = time_it(ws, reps, [&] {
        cuda_ok(cudaMemcpyAsync(y.data(), x.data(), n * 4, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync");
      });
      const Timing copy_part = time_it(ws, reps, [&] {
        cuda_ok(cudaMemcpyAsync(y.data(), x.data(), p * 4, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync");
      });
      const double full_gbps = 2.0 * n * 4 / (copy_full.us * 1e3);
      const double part_gbps = 2.0 * p * 4 / (copy_part.us * 1e3);

      // accumulate works on a copy of x (the residual grows by grad each call: stays finite).
      cuda_ok(cudaMemcpyAsync(y.data(), x.data(), n * 4, cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync");
      const Timing acc = time_it(ws, reps, [&] {
        dev::accumulate(ws, y.data(), g.data(), static_cast<std::int64_t>(n), true);
      });

      std::int64_t selected = 0;
      const Timing sel = time_it(ws, reps, [&] {
        selected =
            dev::select_threshold(ws, x.data(), static_cast<std::int64_t>(p), thr, 0, out.data());
      });

      sparsifiers::LadderGrid grid;
      grid.mant_bits = 4;
      grid.rungs = 129;
      const std::uint32_t c = sparsifiers::ladder_key(thr, grid.mant_bits);
      grid.lo_key = c > 64 ? c - 64 : 0;
      std::vector<std::int64_t> bins(129, 0);
      std::int64_t candidates = 0;
      const Timing lad = time_it(ws, reps, [&] {
        std::fill(bins.begin(), bins.end(), 0);
        candidates =
            dev::ladder_count(ws, x.data(), static_cast<std::int64_t>(p), grid, bins.data());
      });

      const auto k = static_cast<std::int64_t>(p / 100);
      const auto [rung, quota] = sparsifiers::own_cut(bins, std::min(k, candidates));
      std::int64_t kept = 0;
      const Timing cut = time_it(ws, reps, [&] {
        kept = dev::take_cut(ws, x.data(), static_cast<std::int64_t>(p), 0, grid, rung, quota,
                             out.data());
      });

      json << (first ? "\n" : ",\n") << "    {\"n\": " << n << ", \"partition\": " << p
           << ", \"threshold\": " << thr << ",\n"
           << "     \"copy_full\": " << entry(copy_full, 2.0 * n * 4, 0) << ",\n"
           << "     \"copy_part\": " << entry(copy_part, 2.0 * p * 4, 0) << ",\n"
           << "     \"accumulate\": " << entry(acc, 3.0 * n * 4, full_gbps) << ",\n"
           << "     \"select_threshold\": "
           << entry(sel, 4.0 * p + 4.0 * selected, part_gbps,
                    ", \"selected\": " + std::to_string(selected))
           << ",\n"
           << "     \"ladder_count\": "
           << entry(lad, 4.0 * p, part_gbps, ", \"candidates\": " + std::to_string(candidates))
           << ",\n"
           << "     \"take_cut\": "
           << entry(cut, 8.0 * p + 4.0 * kept, part_gbps,
                    ", \"rung\": " + std::to_string(rung) + ", \"quota\": " +
                        std::to_string(quota) + ", \"kept\": " + std::to_string(kept))
           << "}";
      first = false;
    }
    json << "\n  ]\n}\n";
    cudaStreamDestroy(stream);
    if (out_path.empty()) {
      std::fputs(json.str().c_str(), stdout);
    } else {
      std::ofstream f(out_path);
      f << json.str();
      if (!f) {
        std::fprintf(stderr, "exdyna_cuda_bench: cannot write %s\n", out_path.c_str());
        return 1;
      }
      std::fprintf(stderr, "exdyna_cuda_bench: wrote %s\n", out_path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exdyna_cuda_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
