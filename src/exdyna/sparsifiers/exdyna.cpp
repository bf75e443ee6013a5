#include "exdyna/sparsifiers/exdyna.hpp"

#include <algorithm>
#include <cstring>
#include <iostream>

#include "exdyna/core/selection.hpp"
#include "exdyna/core/threshold.hpp"
#include "exdyna/core/timer.hpp"

namespace exdyna::sparsifiers {

namespace {

const SparsifierConfig& validated(const SparsifierConfig& cfg) {
  cfg.validate();
  return cfg;
}

// Little-endian-agnostic raw serialisation: state is read back by the same build.
class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_all(std::span<const T> v) {
    put<std::int64_t>(static_cast<std::int64_t>(v.size()));
    for (const auto& x : v) put(x);
  }
  std::vector<std::byte> take() { return std::move(buf_); }

 private:
  std::vector<std::byte> buf_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> s) : s_(s) {}
  template <typename T>
  T get() {
    EXDYNA_CHECK_T(DataError, pos_ + sizeof(T) <= s_.size(), "exdyna state is truncated at byte ",
                   pos_, " of ", s_.size());
    T v;
    std::memcpy(&v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> get_all(std::int64_t expected) {
    const auto n = get<std::int64_t>();
    EXDYNA_CHECK_T(DataError, n == expected, "exdyna state holds a list of ", n,
                   " entries; expected ", expected);
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = get<T>();
    return v;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  std::span<const std::byte> s_;
  std::size_t pos_ = 0;
};

constexpr std::uint32_t kStateMagic = 0x31445845;  // "EXD1"
constexpr std::uint32_t kStateVersion = 1;

}  // namespace

ExDyna::ExDyna(const SparsifierConfig& cfg)
    : cfg_(validated(cfg)),
      k_(cfg.k()),
      parts_(core::make_block_layout(cfg.n_g, cfg.world_size, cfg.exdyna.n_blocks), cfg.world_size,
             cfg.exdyna.min_blk, cfg.exdyna.blk_move, cfg.exdyna.alpha),
      threshold_(cfg.exdyna.initial_threshold > 0 ? cfg.exdyna.initial_threshold
                                                  : core::initial_threshold(cfg.k())),
      prev_counts_(static_cast<std::size_t>(cfg.world_size), 0) {
  if (!parts_.layout().note.empty() && cfg_.rank == 0)
    std::clog << "exdyna: " << parts_.layout().note << "\n";
  const std::size_t n = static_cast<std::size_t>(cfg_.world_size);
  gather_mine_.resize(1);
  gather_all_.resize(n);
  counts_.resize(n);
  // Room for the largest partition plus a margin, so early re-balancing does not reallocate.
  std::int64_t largest = 0;
  for (int j = 0; j < parts_.size(); ++j) largest = std::max(largest, parts_.range(j).size());
  idx_.resize(static_cast<std::size_t>(std::min(cfg_.n_g, largest + largest / 4)));
}

std::string ExDyna::fingerprint() const {
  return "exdyna;" + cfg_.fingerprint();
}

void ExDyna::step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                  core::StepStats& stats) {
  const int n = cfg_.world_size;
  EXDYNA_CHECK_ARG(comm.size() == n && comm.rank() == cfg_.rank, "exdyna was configured for rank ",
                   cfg_.rank, " of ", n, " but the communicator is rank ", comm.rank(), " of ",
                   comm.size());
  EXDYNA_CHECK_ARG(static_cast<std::int64_t>(acc.size()) == cfg_.n_g, "exdyna got ", acc.size(),
                   " gradients; expected n_g = ", cfg_.n_g);
  const std::int64_t t = iteration_;
  core::Stopwatch sw;

  // Alg. 3 line 29-31 (the adjustment itself ran at the end of the previous step).
  const int alloc = core::Partitions::allocation(t, cfg_.rank, n);
  const core::ElementRange range = parts_.range(alloc);
  const float thr = static_cast<float>(threshold_);
  stats.threshold = threshold_;
  stats.k_target = k_;
  stats.target_density = cfg_.density;
  stats.alloc_per_worker.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) stats.alloc_per_worker[i] = core::Partitions::allocation(t, i, n);
  stats.blocks_per_partition.assign(parts_.blocks().begin(), parts_.blocks().end());
  stats.times.other += sw.lap();

  // Alg. 4 on this worker's partition.
  if (static_cast<std::int64_t>(idx_.size()) < range.size())
    idx_.resize(static_cast<std::size_t>(range.size()));
  std::size_t mine = core::select_threshold(
      acc.subspan(static_cast<std::size_t>(range.begin), static_cast<std::size_t>(range.size())),
      thr, static_cast<std::uint32_t>(range.begin), idx_.data());
  if (mine == 0) {
    // Nothing passed: one deterministic index from this worker's own partition, so exclusivity
    // holds and every count stays positive.
    idx_[0] = static_cast<Index>(range.begin + t % range.size());
    mine = 1;
  }
  stats.times.select += sw.lap();

  // Alg. 1 lines 11-13: counts, indices, then the summed values at the indices.
  gather_mine_[0] = static_cast<std::int64_t>(mine);
  comm.allgather_counts(gather_mine_, gather_all_);
  for (int i = 0; i < n; ++i) counts_[i] = gather_all_[i];
  comm.allgather_list<Index>(std::span<const Index>(idx_.data(), mine), counts_, cfg_.gather_mode,
                             out.indices);
  stats.times.allgather += sw.lap();

  out.dense = false;
  out.values.resize(out.indices.size());
  for (std::size_t j = 0; j < out.indices.size(); ++j) out.values[j] = acc[out.indices[j]];
  comm.allreduce_sum(out.values);
  stats.times.allreduce += sw.lap();

  // Statistics, then Alg. 5 and Alg. 3 for the next step.
  stats.k_per_worker.assign(counts_.begin(), counts_.end());
  stats.finish_counts();
  stats.k_unique = stats.k_total;  // exclusive partitions: no duplicates by construction
  threshold_ = core::paper_next_threshold(threshold_, k_, stats.k_total, cfg_.exdyna.beta,
                                          cfg_.exdyna.gamma);
  parts_.adjust_paper(counts_, t);
  std::copy(counts_.begin(), counts_.end(), prev_counts_.begin());
  ++iteration_;
  stats.times.other += sw.lap();
}

std::vector<std::byte> ExDyna::save_state() const {
  Writer w;
  w.put(kStateMagic);
  w.put(kStateVersion);
  w.put<std::int64_t>(cfg_.n_g);
  w.put<std::int64_t>(parts_.layout().n_blocks);
  w.put(iteration_);
  w.put(threshold_);
  w.put_all(parts_.blocks());
  w.put_all(std::span<const std::int64_t>(prev_counts_));
  return w.take();
}

void ExDyna::load_state(std::span<const std::byte> state) {
  Reader r(state);
  EXDYNA_CHECK_T(DataError, r.get<std::uint32_t>() == kStateMagic,
                 "exdyna state does not start with the exdyna magic; not an exdyna checkpoint");
  const auto version = r.get<std::uint32_t>();
  EXDYNA_CHECK_T(DataError, version == kStateVersion, "exdyna state version ", version,
                 " is not supported; expected ", kStateVersion);
  const auto n_g = r.get<std::int64_t>();
  EXDYNA_CHECK_T(DataError, n_g == cfg_.n_g, "exdyna state is for n_g = ", n_g, "; expected ",
                 cfg_.n_g);
  const auto nb = r.get<std::int64_t>();
  EXDYNA_CHECK_T(DataError, nb == parts_.layout().n_blocks, "exdyna state is for n_b = ", nb,
                 "; expected ", parts_.layout().n_blocks);
  const auto iteration = r.get<std::int64_t>();
  const auto threshold = r.get<double>();
  const auto blocks = r.get_all<std::int64_t>(cfg_.world_size);
  auto prev = r.get_all<std::int64_t>(cfg_.world_size);
  EXDYNA_CHECK_T(DataError, r.done(), "exdyna state has trailing bytes");
  EXDYNA_CHECK_T(DataError, iteration >= 0 && threshold == threshold,
                 "exdyna state holds iteration ", iteration, " and threshold ", threshold,
                 "; expected iteration >= 0 and a number");
  parts_.set_blocks(blocks);
  iteration_ = iteration;
  threshold_ = threshold;
  prev_counts_ = std::move(prev);
}

}  // namespace exdyna::sparsifiers
