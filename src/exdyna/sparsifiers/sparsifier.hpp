// The Sparsifier interface. A sparsifier sees this worker's accumulated gradient acc (error
// feedback already applied), talks to its peers through a Communicator, and returns the global
// sparse set: the gathered indices and, at each, the SUM over workers of acc (Ok-Topk: over the
// workers that selected it, see SparseResult::partial). Every rank must
// return identical results. Error feedback (residual bookkeeping, averaging, scatter) wraps the
// sparsifier: see error_feedback.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sparsifiers {

class DeviceStep;  // device_step.hpp

// Indices travel as 32-bit integers; n_g >= 2^32 is refused at construction.
using Index = std::uint32_t;

struct SparseResult {
  // When dense is true, values holds all n_g sums in order and indices is empty.
  bool dense = false;
  std::vector<Index> indices;  // gathered indices, identical order on every rank, no duplicates
  std::vector<float> values;   // values[j] = sum over workers of acc_w[indices[j]]
  // The format the values were sent in (--values): each worker sent round(acc_w) in it, so error
  // feedback keeps acc - round(acc) at the sent indices. Set by allreduce_values.
  core::ValueFormat values_format = core::ValueFormat::kFp32;
  // Ok-Topk sums, at a gathered index, only the workers that selected it locally: then partial is
  // true, values[j] is the sum over those workers, and sent lists (sorted ascending, a subset of
  // indices) the indices where THIS worker's acc went in; error feedback takes the sent part out
  // of the residual there only. For every other sparsifier partial is false and every worker
  // sent at every gathered index.
  bool partial = false;
  std::vector<Index> sent;
};

// The largest iteration counter a saved state may hold: far beyond any run (2^40 steps), and it
// leaves room for every later ++iteration. A larger one is a corrupt state, refused by load_state.
inline constexpr std::int64_t kMaxStateIteration = std::int64_t{1} << 40;

// The state of a sparsifier whose only memory is its iteration counter (Top-k, CLT-k, Random-k,
// DGC): 8 bytes. load_iteration_state refuses a state of another length or a counter outside
// 0..kMaxStateIteration, naming the sparsifier.
std::vector<std::byte> save_iteration_state(std::int64_t iteration);
std::int64_t load_iteration_state(std::span<const std::byte> state, std::string_view sparsifier);

// A sparsifier's constructor validates its SparsifierConfig (SparsifierConfig::validate): the
// one check of the options on the way from a command line or a Python call to a running
// sparsifier (factory.hpp).
class Sparsifier {
 public:
  virtual ~Sparsifier() = default;
  virtual std::string_view name() const = 0;

  // One step: select from acc (size n_g), exchange, fill out and the selection fields of stats
  // (threshold, k_per_worker, partitions, bytes, select/allgather/allreduce times).
  // Collectives are called in the same order on every rank.
  virtual void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
                    StepStats& stats) = 0;

  // Whether step_device runs this sparsifier on a gradient in device memory (ExDyna in paper and
  // exact mode, dense).
  virtual bool runs_on_device() const { return false; }
  // step() on acc in device memory (n_g values): the passes that read it, and the exchange, go
  // through `device`, which holds the result afterwards (gathered(), sums()); the decisions and
  // the statistics are step()'s. The default refuses, naming the sparsifier.
  virtual void step_device(const float* acc, DeviceStep& device, comm::Communicator& comm,
                           StepStats& stats);

  // A canonical description of the sparsifier and all its options, equal on ranks that agree.
  virtual std::string fingerprint() const = 0;

  // Serialised mutable state (threshold, partitions, iteration...), for checkpoints.
  virtual std::vector<std::byte> save_state() const = 0;
  virtual void load_state(std::span<const std::byte> state) = 0;
};

}  // namespace exdyna::sparsifiers
