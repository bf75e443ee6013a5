#include "exdyna/sparsifiers/oktopk.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "exdyna/core/byte_io.hpp"
#include "exdyna/core/half_float.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

namespace {

// The threshold corrections of the authors' code (oktopk.hpp).
constexpr double kLocalRaise = 1.03;  // while more than 4k/3 pass, at most kMaxRaises times
constexpr int kMaxRaises = 5;
constexpr double kLocalScale = 1.012;
constexpr double kGlobalScale = 1.008;
constexpr std::uint32_t kStateMagic = 0x4f6b546bu;  // "OkTk"

// A value as it travels: in float32, or rounded to the 16-bit format (refused if it overflows
// fp16, naming it: the residual could not keep acc - Inf).
float sendable(float v, core::ValueFormat f, Index at) {
  if (f == core::ValueFormat::kFp32) return v;
  const float r = core::round_to_format(v, f);
  if (!std::isfinite(r))
    throw DataError(detail::concat("--values ", core::to_string(f), ": value ", v, " at index ", at,
                                   " overflows the format; expected |value| < 65504 (or use "
                                   "--values bf16)"));
  return r;
}

void pack(OkTopkRecord32& r, Index i, float v, core::ValueFormat) {
  r = {i, v};
}
void pack(OkTopkRecord16& r, Index i, float v, core::ValueFormat f) {
  r = {static_cast<std::uint16_t>(i & 0xffffu), static_cast<std::uint16_t>(i >> 16),
       core::to_bits16(v, f)};
}
Index index_of(const OkTopkRecord32& r) {
  return r.index;
}
Index index_of(const OkTopkRecord16& r) {
  return static_cast<Index>(r.index_lo) | (static_cast<Index>(r.index_hi) << 16);
}
float value_of(const OkTopkRecord32& r, core::ValueFormat) {
  return r.value;
}
float value_of(const OkTopkRecord16& r, core::ValueFormat f) {
  return core::from_bits16(r.bits, f);
}

// Records (sorted by index) into the result.
template <typename Rec>
void unpack_result(const std::vector<Rec>& recs, core::ValueFormat f, SparseResult& out) {
  out.indices.resize(recs.size());
  out.values.resize(recs.size());
  for (std::size_t j = 0; j < recs.size(); ++j) {
    out.indices[j] = index_of(recs[j]);
    out.values[j] = value_of(recs[j], f);
  }
}

// Elements of [a0, a1) that fall in [b0, b1).
std::int64_t overlap(std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) {
  return std::max<std::int64_t>(0, std::min(a1, b1) - std::max(a0, b0));
}

}  // namespace

OkTopk::OkTopk(const SparsifierConfig& cfg) : cfg_(cfg) {
  cfg_.validate();
  const auto p = static_cast<std::size_t>(cfg_.world_size);
  bounds_.resize(p + 1);
  for (std::size_t r = 0; r <= p; ++r)
    bounds_[r] = cfg_.n_g * static_cast<std::int64_t>(r) / static_cast<std::int64_t>(p);
}

void OkTopk::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                  StepStats& stats) {
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "oktopk: gradient has ",
                   acc.size(), " elements, expected n_g = ", cfg_.n_g);
  EXDYNA_CHECK_ARG(comm.size() == cfg_.world_size, "oktopk: configured for ", cfg_.world_size,
                   " workers but the communicator has ", comm.size());
  stats.k_target = cfg_.k();
  stats.target_density = cfg_.density;
  if (cfg_.values == core::ValueFormat::kFp32)
    step_with(acc, comm, out, stats, b32_);
  else
    step_with(acc, comm, out, stats, b16_);
  ++iteration_;
}

template <typename Rec>
void OkTopk::step_with(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                       StepStats& stats, Buffers<Rec>& b) {
  const bool reevaluate = iteration_ % cfg_.oktopk.period == 0;
  core::PhaseStopwatch sw;
  select_local(acc, reevaluate);
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
  if (iteration_ % cfg_.oktopk.repartition == 0) repartition(comm);
  stats.times.other += sw.lap();
  reduce_scatter(acc, comm, b);
  stats.times.allreduce += sw.lap();
  if (reevaluate)
    select_global_exact(comm, out, stats, b);
  else
    select_global_reused(comm, out, stats, b);
  finish(out);
  stats.finish_counts();
  stats.k_unique = static_cast<std::int64_t>(out.indices.size());
}

// Step 1: L_i, ascending, into mine_.
void OkTopk::select_local(std::span<const float> acc, bool reevaluate) {
  const auto k = cfg_.k();
  if (reevaluate || local_th_ <= 0) {
    core::topk_select(acc, static_cast<std::size_t>(k), core::TopkMethod::kNthElement, mine_,
                      topk_);
    float smallest = std::numeric_limits<float>::infinity();
    for (const Index i : mine_) smallest = std::min(smallest, std::abs(acc[i]));
    local_th_ = mine_.empty() ? 0.0 : smallest;
  } else {
    cand_.resize(acc.size());  // select_threshold needs room for every element
    std::size_t c = sparsifiers::select_threshold(acc, sparsifiers::as_compare_threshold(local_th_),
                                                  0, cand_.data());
    // A raised threshold keeps a subset of what passed: filter the c passed, in place, instead
    // of reading all n_g again (the same threshold and indices as a fresh pass).
    for (int r = 0; r < kMaxRaises && 3 * static_cast<std::int64_t>(c) > 4 * k; ++r) {
      local_th_ *= kLocalRaise;
      const float th = sparsifiers::as_compare_threshold(local_th_);
      std::size_t kept = 0;
      for (std::size_t j = 0; j < c; ++j)
        if (std::abs(acc[cand_[j]]) >= th) cand_[kept++] = cand_[j];
      c = kept;
    }
    mine_.assign(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(c));
  }
  const auto c = static_cast<std::int64_t>(mine_.size());
  if (3 * c < 2 * k)
    local_th_ /= kLocalScale;
  else if (4 * c > 5 * k)
    local_th_ *= kLocalScale;
}

// Step 2: the mean of every worker's equal-count cut of its L_i. The sums are integers below
// 2^53, exact in double on every engine.
void OkTopk::repartition(comm::Communicator& comm) {
  const auto p = static_cast<std::size_t>(comm.size());
  if (p == 1) return;  // one region, [0, n_g)
  auto& proposal = proposal_;
  proposal.resize(p - 1);
  const std::size_t c = mine_.size();
  for (std::size_t j = 1; j < p; ++j)
    proposal[j - 1] = c >= p ? static_cast<double>(mine_[j * (c / p)])
                             : static_cast<double>(cfg_.n_g * static_cast<std::int64_t>(j) /
                                                   static_cast<std::int64_t>(p));
  comm.allreduce_sum(std::span<double>(proposal));
  for (std::size_t j = 1; j < p; ++j) {
    const auto b = static_cast<std::int64_t>(std::floor(proposal[j - 1] / static_cast<double>(p)));
    bounds_[j] = std::clamp(b, bounds_[j - 1], cfg_.n_g);
  }
  bounds_[p] = cfg_.n_g;
}

// Step 3: L_i split by region, sent to the owners; this owner sums what it receives, in rank
// order, into (reduced_idx_, reduced_val_).
template <typename Rec>
void OkTopk::reduce_scatter(std::span<const float> acc, comm::Communicator& comm, Buffers<Rec>& b) {
  const auto p = static_cast<std::size_t>(comm.size());
  send_counts_.assign(p, 0);
  std::size_t pos = 0;
  for (std::size_t r = 0; r < p; ++r) {
    const auto end =
        std::lower_bound(mine_.begin() + static_cast<std::ptrdiff_t>(pos), mine_.end(),
                         bounds_[r + 1], [](Index i, std::int64_t bound) { return i < bound; });
    const auto e = static_cast<std::size_t>(end - mine_.begin());
    send_counts_[r] = static_cast<std::int64_t>(e - pos);
    pos = e;
  }
  b.send.resize(mine_.size());
  for (std::size_t j = 0; j < mine_.size(); ++j)
    pack(b.send[j], mine_[j], sendable(acc[mine_[j]], cfg_.values, mine_[j]), cfg_.values);
  comm.alltoall_list<Rec>(b.send, send_counts_, b.recv, recv_counts_);

  const auto me = static_cast<std::size_t>(comm.rank());
  if (dense_.size() != acc.size()) dense_.assign(acc.size(), 0.0f);
  recv_idx_.resize(b.recv.size());
  for (std::size_t j = 0; j < b.recv.size(); ++j) {
    const Index i = index_of(b.recv[j]);
    if (i < bounds_[me] || i >= bounds_[me + 1])
      throw CommError(detail::concat("oktopk: rank ", me, " received index ", i,
                                     " outside its region [", bounds_[me], ", ", bounds_[me + 1],
                                     "): the ranks disagree on the regions"));
    recv_idx_[j] = i;
    dense_[i] += value_of(b.recv[j], cfg_.values);
  }
  union_of_sorted_lists(recv_idx_, recv_counts_, reduced_idx_, merge_scratch_, run_bounds_);
  reduced_val_.resize(reduced_idx_.size());
  for (std::size_t j = 0; j < reduced_idx_.size(); ++j) {
    reduced_val_[j] = dense_[reduced_idx_[j]];
    dense_[reduced_idx_[j]] = 0.0f;
  }
}

// Step 4 on a re-evaluation step: every reduced entry gathered, the exact top-k everywhere.
template <typename Rec>
void OkTopk::select_global_exact(comm::Communicator& comm, SparseResult& out, StepStats& stats,
                                 Buffers<Rec>& b) {
  core::PhaseStopwatch sw;
  const auto p = static_cast<std::size_t>(comm.size());
  b.send.resize(reduced_idx_.size());
  for (std::size_t j = 0; j < reduced_idx_.size(); ++j)
    pack(b.send[j], reduced_idx_[j], sendable(reduced_val_[j], cfg_.values, reduced_idx_[j]),
         cfg_.values);
  const auto mine = static_cast<std::int64_t>(b.send.size());
  counts_.resize(p);
  comm.allgather_counts(std::span<const std::int64_t>(&mine, 1), counts_);
  comm.allgather_list<Rec>(b.send, counts_, cfg_.gather_mode, b.gathered);
  stats.times.allgather += sw.lap();

  // Regions ascend with the rank and each owner's list ascends: the gathered records are sorted
  // by index, so the positions topk_select returns (ascending) give ascending indices.
  mags_.resize(b.gathered.size());
  for (std::size_t j = 0; j < mags_.size(); ++j) mags_[j] = value_of(b.gathered[j], cfg_.values);
  core::topk_select(mags_, static_cast<std::size_t>(cfg_.k()), core::TopkMethod::kNthElement,
                    picked_, topk_);
  out.indices.resize(picked_.size());
  out.values.resize(picked_.size());
  stats.k_per_worker.assign(p, 0);
  float smallest = std::numeric_limits<float>::infinity();
  std::size_t owner = 0;
  std::int64_t owner_end = counts_[0];
  for (std::size_t j = 0; j < picked_.size(); ++j) {
    const auto at = picked_[j];
    out.indices[j] = index_of(b.gathered[at]);
    out.values[j] = mags_[at];
    smallest = std::min(smallest, std::abs(mags_[at]));
    while (static_cast<std::int64_t>(at) >= owner_end) owner_end += counts_[++owner];
    ++stats.k_per_worker[owner];
  }
  global_th_ = picked_.empty() ? 0.0 : smallest;
  stats.threshold = global_th_;
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();
}

// Step 4 and 5 on a step that reuses th_g: keep, balance (padded only), all-gather.
template <typename Rec>
void OkTopk::select_global_reused(comm::Communicator& comm, SparseResult& out, StepStats& stats,
                                  Buffers<Rec>& b) {
  core::PhaseStopwatch sw;
  const auto p = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  const float th = sparsifiers::as_compare_threshold(global_th_);
  b.send.clear();
  for (std::size_t j = 0; j < reduced_idx_.size(); ++j)
    if (std::abs(reduced_val_[j]) >= th) {
      b.send.emplace_back();
      pack(b.send.back(), reduced_idx_[j], sendable(reduced_val_[j], cfg_.values, reduced_idx_[j]),
           cfg_.values);
    }
  stats.times.select += sw.lap();
  stats.times.select_cpu += sw.last_cpu();

  const auto mine = static_cast<std::int64_t>(b.send.size());
  counts_.resize(p);
  comm.allgather_counts(std::span<const std::int64_t>(&mine, 1), counts_);
  std::int64_t total = 0, start = 0;
  for (std::size_t r = 0; r < p; ++r) {
    if (r == me) start = total;
    total += counts_[r];
  }
  if (cfg_.gather_mode == comm::GatherMode::kPadded) {
    // Rank q holds positions [q T / P, (q + 1) T / P) of the global order afterwards.
    const auto share = [&](std::size_t q) {
      return total * static_cast<std::int64_t>(q) / static_cast<std::int64_t>(p);
    };
    send_counts_.assign(p, 0);
    recv_counts_.assign(p, 0);
    std::int64_t from = 0;
    for (std::size_t q = 0; q < p; ++q) {
      send_counts_[q] = overlap(start, start + mine, share(q), share(q + 1));
      recv_counts_[q] = overlap(from, from + counts_[q], share(me), share(me + 1));
      from += counts_[q];
    }
    comm.alltoall_list_known<Rec>(b.send, send_counts_, recv_counts_, b.balanced);
    for (std::size_t q = 0; q < p; ++q) counts_[q] = share(q + 1) - share(q);
    comm.allgather_list<Rec>(b.balanced, counts_, cfg_.gather_mode, b.gathered);
  } else {
    comm.allgather_list<Rec>(b.send, counts_, cfg_.gather_mode, b.gathered);
  }
  stats.times.allgather += sw.lap();

  unpack_result(b.gathered, cfg_.values, out);
  stats.k_per_worker.assign(counts_.begin(), counts_.end());
  stats.threshold = global_th_;
  const auto k = cfg_.k();
  if (3 * total < 2 * k)
    global_th_ /= kGlobalScale;
  else if (3 * total > 4 * k)
    global_th_ *= kGlobalScale;
}

// Where this worker's acc went in: L_i within the global selection (both ascending).
void OkTopk::finish(SparseResult& out) {
  out.dense = false;
  out.partial = true;
  out.values_format = cfg_.values;
  out.sent.clear();
  std::set_intersection(mine_.begin(), mine_.end(), out.indices.begin(), out.indices.end(),
                        std::back_inserter(out.sent));
}

std::string OkTopk::fingerprint() const {
  std::ostringstream os;
  os << "oktopk;period=" << cfg_.oktopk.period << ";repartition=" << cfg_.oktopk.repartition << ";"
     << cfg_.fingerprint();
  return os.str();
}

std::vector<std::byte> OkTopk::save_state() const {
  core::ByteWriter w;
  w.put(kStateMagic);
  w.put(iteration_);
  w.put(local_th_);
  w.put(global_th_);
  w.put_list(std::span<const std::int64_t>(bounds_));
  return w.take();
}

void OkTopk::load_state(std::span<const std::byte> state) {
  core::ByteReader r(state, "oktopk state");
  EXDYNA_CHECK_T(DataError, r.get<std::uint32_t>() == kStateMagic,
                 "oktopk state does not start with the oktopk magic; not an oktopk checkpoint");
  const auto iteration = r.get<std::int64_t>();
  const auto local = r.get<double>();
  const auto global = r.get<double>();
  const auto bounds = r.get_list<std::int64_t>();
  r.expect_end();
  EXDYNA_CHECK_T(DataError, iteration >= 0 && iteration <= kMaxStateIteration,
                 "oktopk state iteration ", iteration, " is not valid; expected 0 .. 2^40");
  EXDYNA_CHECK_T(DataError,
                 std::isfinite(local) && local >= 0 && std::isfinite(global) && global >= 0,
                 "oktopk state thresholds ", local, " and ", global,
                 " are not valid; expected finite values >= 0");
  const auto p = static_cast<std::size_t>(cfg_.world_size);
  EXDYNA_CHECK_T(DataError, bounds.size() == p + 1, "oktopk state has ", bounds.size(),
                 " region boundaries; expected ", p + 1, " for ", p, " workers");
  bool ordered = bounds.front() == 0 && bounds.back() == cfg_.n_g;
  for (std::size_t j = 1; j < bounds.size(); ++j) ordered = ordered && bounds[j - 1] <= bounds[j];
  EXDYNA_CHECK_T(DataError, ordered,
                 "oktopk state region boundaries are not 0 <= B_1 <= ... <= n_g = ", cfg_.n_g);
  iteration_ = iteration;
  local_th_ = local;
  global_th_ = global;
  bounds_ = bounds;
}

}  // namespace exdyna::sparsifiers
