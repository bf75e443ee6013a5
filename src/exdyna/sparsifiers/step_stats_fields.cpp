#include "exdyna/sparsifiers/step_stats_fields.hpp"

namespace exdyna::sparsifiers {

namespace {

// Readers of one member, so that each entry below names its member once.
template <auto M>
StatValue int_of(const StepStats& s) {
  return static_cast<std::int64_t>(s.*M);
}
template <auto M>
StatValue real_of(const StepStats& s) {
  return static_cast<double>(s.*M);
}
template <auto M>
StatValue bytes_of(const StepStats& s) {
  return static_cast<std::int64_t>(s.bytes.*M);
}
template <auto M>
StatValue time_of(const StepStats& s) {
  return s.times.*M;
}
template <auto M>
std::vector<std::int64_t> ints_of(const StepStats& s) {
  return {(s.*M).begin(), (s.*M).end()};
}

const StatField kScalars[] = {
    {"iteration", "the step's number, from 0", int_of<&StepStats::iteration>},
    {"world_size", "ranks in the group", int_of<&StepStats::world_size>},
    {"n_g", "gradient length (elements)", int_of<&StepStats::n_g>},
    {"k_target", "target count k = floor(d n_g) (elements)", int_of<&StepStats::k_target>},
    {"target_density", "d, the density asked for", real_of<&StepStats::target_density>},
    {"threshold", "the selection threshold used (|value|; NaN for sparsifiers without one)",
     real_of<&StepStats::threshold>},
    {"k_total", "k' = sum of k_i, values the ranks sent (elements)", int_of<&StepStats::k_total>},
    {"k_unique", "distinct indices in the update (elements)", int_of<&StepStats::k_unique>},
    {"density", "actual density k' / n_g", real_of<&StepStats::density>},
    {"density_error", "Eq. 6: |k - k'| / n_g", real_of<&StepStats::density_error>},
    {"f_t", "Eq. 5: n max k_i / k' (1 when the ranks are balanced)", real_of<&StepStats::f_t>},
    {"padded_elements", "n max k_i - k', padding a padded all-gather sends (elements)",
     int_of<&StepStats::padded_elements>},
    {"collectives", "collective calls of the step, each one latency-bound round or more",
     [](const StepStats& s) -> StatValue {
       return static_cast<std::int64_t>(s.bytes.collectives);
     }},
    {"fused", "1: counts and indices in one all-gather (exact controller under a cap), else 0",
     int_of<&StepStats::fused>},
    {"non_finite",
     "1: a rank's gradient was not finite and non_finite=skip passed it on as NaN, else 0",
     int_of<&StepStats::non_finite>},
    {"step_scale", "the factor step_clip scaled the update by (1: not clipped)",
     real_of<&StepStats::step_scale>},
    {"global_error", "Eq. 1: mean over ranks of the residual's norm (NaN when not measured)",
     real_of<&StepStats::global_error>},
    {"own_partition", "length of the partition this rank selected from (elements; ExDyna, else 0)",
     int_of<&StepStats::own_partition>},
    {"own_candidates",
     "values at or above this rank's floor that its pass counted (exact controller, else 0)",
     int_of<&StepStats::own_candidates>},
};

using comm::ByteCounts;
const StatField kBytes[] = {
    {"allgather_counts", "all-gather of the per-rank counts (bytes)",
     bytes_of<&ByteCounts::allgather_counts>},
    {"allgather_indices", "all-gather of the index lists, padding included (bytes)",
     bytes_of<&ByteCounts::allgather_indices>},
    {"allreduce", "all-reduce of the values (bytes)", bytes_of<&ByteCounts::allreduce>},
    {"broadcast", "broadcast of the leader's indices, CLT-k (bytes)",
     bytes_of<&ByteCounts::broadcast>},
    {"alltoall", "all-to-all lists sent to the other ranks, Ok-Topk (bytes)",
     bytes_of<&ByteCounts::alltoall>},
    {"padded_elements", "padding elements that padded all-gathers sent (elements, not bytes)",
     bytes_of<&ByteCounts::padded_elements>},
    {"total", "the five collectives together (bytes)",
     [](const StepStats& s) -> StatValue { return static_cast<std::int64_t>(s.bytes.total()); }},
};

const StatField kTimes[] = {
    {"accumulate", "error feedback acc = residual + grad (s)", time_of<&PhaseTimes::accumulate>},
    {"select", "choosing the indices (s)", time_of<&PhaseTimes::select>},
    {"allgather", "all-gathers of the counts and indices (s)", time_of<&PhaseTimes::allgather>},
    {"allreduce", "all-reduce of the values or the dense vector (s)",
     time_of<&PhaseTimes::allreduce>},
    {"broadcast", "broadcast, CLT-k (s)", time_of<&PhaseTimes::broadcast>},
    {"update", "scatter of the averaged update and residual zeroing (s)",
     time_of<&PhaseTimes::update>},
    {"other", "partition allocation, threshold scaling, bookkeeping (s)",
     time_of<&PhaseTimes::other>},
    {"non_comm", "accumulate + select + update + other (s)",
     [](const StepStats& s) -> StatValue { return s.times.non_comm(); }},
    {"cpu", "CPU time of the stepping thread over the step (s; set by exdyna simulate, else 0)",
     time_of<&PhaseTimes::cpu>},
    {"cpu_comm", "of cpu, the part inside collectives (s; set by exdyna simulate, else 0)",
     time_of<&PhaseTimes::cpu_comm>},
    {"select_cpu", "CPU time of the stepping thread in select (s)",
     time_of<&PhaseTimes::select_cpu>},
};

const StatGroup kGroups[] = {
    {"bytes", "bytes_", "this rank's bytes of each collective", kBytes},
    {"times", "t_", "this rank's wall-clock seconds of each phase", kTimes},
};

const PerWorkerField kPerWorker[] = {
    {"k_per_worker", "k_w", "k_i, the values rank i selected (elements)", 0,
     ints_of<&StepStats::k_per_worker>},
    {"alloc_per_worker", "alloc_w", "the partition rank i selected from (ExDyna; else empty, -1)",
     -1, ints_of<&StepStats::alloc_per_worker>},
    {"blocks_per_partition", "blocks_p", "blocks in partition j (ExDyna; else empty, 0)", 0,
     ints_of<&StepStats::blocks_per_partition>},
};

}  // namespace

std::span<const StatField> step_scalar_fields() {
  return kScalars;
}
std::span<const StatGroup> step_field_groups() {
  return kGroups;
}
std::span<const PerWorkerField> step_per_worker_fields() {
  return kPerWorker;
}

std::vector<std::string> step_scalar_columns() {
  std::vector<std::string> out;
  for (const auto& f : kScalars) out.emplace_back(f.name);
  for (const auto& g : kGroups)
    for (const auto& f : g.fields)
      out.push_back(std::string(g.column_prefix) + std::string(f.name));
  return out;
}

std::vector<StatValue> step_scalar_values(const StepStats& s) {
  std::vector<StatValue> out;
  for (const auto& f : kScalars) out.push_back(f.read(s));
  for (const auto& g : kGroups)
    for (const auto& f : g.fields) out.push_back(f.read(s));
  return out;
}

std::vector<std::string> step_stat_columns(int workers) {
  auto out = step_scalar_columns();
  for (const auto& f : kPerWorker)
    for (int i = 0; i < workers; ++i)
      out.push_back(std::string(f.column_prefix) + std::to_string(i));
  return out;
}

std::vector<StatValue> step_stat_values(const StepStats& s, int workers) {
  auto out = step_scalar_values(s);
  for (const auto& f : kPerWorker) {
    const auto v = f.read(s);
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      out.emplace_back(i < v.size() ? v[i] : f.missing);
  }
  return out;
}

double stat_as_double(const StatValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

}  // namespace exdyna::sparsifiers
