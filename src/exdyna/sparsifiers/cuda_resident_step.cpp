#include "exdyna/sparsifiers/cuda_resident_step.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "exdyna/sparsifiers/exdyna/device_wire.hpp"

namespace exdyna::sparsifiers {

namespace dev = core::device;

namespace {

void cuda_ok(cudaError_t e, const char* what) {
  EXDYNA_CHECK(e == cudaSuccess, "CUDA call ", what, " failed: ", cudaGetErrorString(e));
}

cudaStream_t stream_of(dev::Workspace& ws) {
  return static_cast<cudaStream_t>(ws.stream());
}

// The readback's layout in pinned memory: the plan's status word, the list's result (4 words),
// the pack's result (7 words), every rank's slot, then the per-block counts.
constexpr std::size_t kStatusWords = 1 + 4 + 7;

}  // namespace

void* CudaResidentStep::Pinned::get(std::size_t want) {
  if (want > bytes) {
    if (p != nullptr) cudaFreeHost(p);
    p = nullptr;
    bytes = 0;
    cuda_ok(cudaMallocHost(&p, want), "cudaMallocHost (resident step)");
    bytes = want;
  }
  return p;
}

CudaResidentStep::CudaResidentStep(dev::Workspace& ws) : ws_(ws) {
  cudaEvent_t e = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  event_ = e;
}

CudaResidentStep::~CudaResidentStep() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
  if (host_.p != nullptr) cudaFreeHost(host_.p);
  if (staging_.p != nullptr) cudaFreeHost(staging_.p);
}

void CudaResidentStep::pack_slot(const float* acc, std::int64_t begin, std::int64_t len,
                                 const LadderGrid& floor_grid, int floor,
                                 const ResidentShape& shape) {
  EXDYNA_CHECK(!posted_, "resident step: pack_slot before the last step's readback was read");
  slot_words_ = shape.layout.slot_words();
  workers_ = shape.workers;
  k_ = shape.k;
  counted_ = false;
  slot_.resize(slot_words_);
  pack_result_.resize(7);
  device::PackShape p;
  p.len = len;
  p.offset = static_cast<std::uint32_t>(begin);
  p.floor_grid = floor_grid;
  p.floor = floor;
  p.rungs = shape.rungs;
  p.ladder_words = shape.ladder_words;
  p.head_words = shape.layout.head_words;
  p.cap = shape.layout.cap;
  device::pack_slot(ws_, acc, p, slot_.data(), pack_result_.data());
}

void CudaResidentStep::allgather_slots(comm::Communicator& comm, const ResidentShape& shape) {
  all_.resize(slot_words_ * static_cast<std::size_t>(shape.workers));
  const std::vector<std::int64_t> counts(static_cast<std::size_t>(shape.workers),
                                         static_cast<std::int64_t>(slot_words_));
  // Equal slots: the padded mode is one all-gather (the exact one, a broadcast per rank).
  comm.allgather_list_device(slot_.data(), sizeof(std::int64_t), counts, comm::GatherMode::kPadded,
                             all_.data());
}

void CudaResidentStep::plan_list(std::span<const Index> one, const ResidentShape& shape) {
  const auto n = static_cast<std::size_t>(shape.workers);
  EXDYNA_CHECK_ARG(one.size() == n, "resident step: ", one.size(), " one-index entries for ", n,
                   " workers");
  plan_out_.resize(device::plan_out_words(shape.workers));
  device::PlanShape ps;
  ps.workers = shape.workers;
  ps.rungs = shape.rungs;
  ps.slot_stride = slot_words_;
  ps.ladder_words = shape.ladder_words;
  ps.k = shape.k;
  ps.cap = shape.plan_cap;
  ps.rank = shape.rank;
  device::plan_counts(ws_, all_.data(), ps, nullptr, plan_out_.data());
  // The one-index table through pinned staging: the last step's copy from it finished before its
  // readback, which finish_resident waited for before this step began.
  auto* staged = static_cast<Index*>(staging_.get(n * sizeof(Index)));
  std::copy(one.begin(), one.end(), staged);
  one_.resize(n);
  cuda_ok(cudaMemcpyAsync(one_.data(), staged, n * sizeof(Index), cudaMemcpyHostToDevice,
                          stream_of(ws_)),
          "cudaMemcpyAsync (one-index table)");
  list_.resize(static_cast<std::size_t>(shape.k));
  unpack_result_.resize(4);
  device::UnpackShape us;
  us.workers = shape.workers;
  us.slot_stride = slot_words_;
  us.head_words = shape.layout.head_words;
  us.cap = shape.layout.cap;
  us.k = shape.k;
  us.sentinel = static_cast<std::uint32_t>(shape.n_g);
  device::unpack_lists(ws_, all_.data(), us, plan_out_.data(), one_.data(), list_.data(),
                       unpack_result_.data());
}

void CudaResidentStep::allreduce_values(const float* acc, comm::Communicator& comm,
                                        const ResidentShape& shape) {
  sums_.resize(static_cast<std::size_t>(shape.k));
  dev::gather_listed(ws_, acc, shape.n_g, list_.data(), shape.k, sums_.data());
  comm.allreduce_sum_device(sums_.data(), static_cast<std::size_t>(shape.k));
}

void CudaResidentStep::count_per_block(const BlockLayout& layout) {
  n_hits_ = static_cast<std::size_t>(layout.n_blocks);
  hits_.resize(n_hits_);
  device::count_per_block_async(ws_, list_.data(), k_, layout.n_g, layout.block_size,
                                layout.n_blocks, hits_.data());
  counted_ = true;
}

void CudaResidentStep::post_readback() {
  const std::size_t slots = slot_words_ * static_cast<std::size_t>(workers_);
  const std::size_t hits = counted_ ? n_hits_ : 0;
  auto* h = static_cast<std::int64_t*>(
      host_.get((kStatusWords + slots) * sizeof(std::int64_t) + hits * sizeof(std::uint32_t)));
  const auto s = stream_of(ws_);
  const auto n = static_cast<std::size_t>(workers_);
  cuda_ok(
      cudaMemcpyAsync(h, plan_out_.data() + n + 3, sizeof(std::int64_t), cudaMemcpyDeviceToHost, s),
      "cudaMemcpyAsync (plan status)");
  cuda_ok(cudaMemcpyAsync(h + 1, unpack_result_.data(), 4 * sizeof(std::int64_t),
                          cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync (list result)");
  cuda_ok(cudaMemcpyAsync(h + 5, pack_result_.data(), 7 * sizeof(std::int64_t),
                          cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync (pack result)");
  cuda_ok(cudaMemcpyAsync(h + kStatusWords, all_.data(), slots * sizeof(std::int64_t),
                          cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync (gathered slots)");
  if (hits > 0)
    cuda_ok(cudaMemcpyAsync(h + kStatusWords + slots, hits_.data(), hits * sizeof(std::uint32_t),
                            cudaMemcpyDeviceToHost, s),
            "cudaMemcpyAsync (block counts)");
  cuda_ok(cudaEventRecord(static_cast<cudaEvent_t>(event_), s), "cudaEventRecord (readback)");
  posted_ = true;
}

ResidentStep::Readback CudaResidentStep::wait_readback() {
  EXDYNA_CHECK(posted_, "resident step: wait_readback with no readback posted");
  // The previous step's event: the device passed it while this step's backward ran, as a rule.
  cuda_ok(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
  posted_ = false;
  const auto* h = static_cast<const std::int64_t*>(host_.p);
  const std::size_t slots = slot_words_ * static_cast<std::size_t>(workers_);
  Readback rb;
  rb.slots = std::span<const std::int64_t>(h + kStatusWords, slots);
  if (counted_)
    rb.hits = std::span<const std::uint32_t>(
        reinterpret_cast<const std::uint32_t*>(h + kStatusWords + slots), n_hits_);
  rb.listed = h[1];
  // This worker's pack first (its own cut, take_cut, the encoding, a cut of other than L), then
  // the plan's status, then the list's (kFusedCapYielded: valid, the stated rule); a slot whose
  // places fell short makes the list no list.
  const std::int64_t* pack = h + 5;
  for (const int i : {2, 3, 4, 6})
    if (pack[i] != rules::kPlanOk) {
      rb.status = pack[i];
      return rb;
    }
  const std::int64_t short_places = rules::kFusedPlacesShort;
  rb.status = h[0] != rules::kPlanOk ? h[0] : h[4] != 0 ? short_places : h[2];
  return rb;
}

}  // namespace exdyna::sparsifiers
