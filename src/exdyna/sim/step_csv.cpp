#include "exdyna/sim/step_csv.hpp"

#include <cstdint>
#include <cstdio>
#include <vector>

namespace exdyna::sim {

namespace {

void append_double(std::string& s, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  s += buf;
}
void append_int(std::string& s, std::int64_t v) {
  s += std::to_string(v);
}

template <typename T>
T at_or(const std::vector<T>& v, std::size_t i, T fallback) {
  return i < v.size() ? v[i] : fallback;
}

}  // namespace

std::string decisions_header(int workers) {
  std::string s = "iter,threshold,k_total,density,f_t";
  for (int i = 0; i < workers; ++i) s += ",k_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",alloc_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",blocks_p" + std::to_string(i);
  s += "\n";
  return s;
}

void append_decisions_row(std::string& s, const sparsifiers::StepStats& st, int workers) {
  append_int(s, st.iteration);
  s += ',';
  append_double(s, st.threshold);
  s += ',';
  append_int(s, st.k_total);
  s += ',';
  append_double(s, st.density);
  s += ',';
  append_double(s, st.f_t);
  for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i) {
    s += ',';
    append_int(s, at_or<std::int64_t>(st.k_per_worker, i, 0));
  }
  for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i) {
    s += ',';
    append_int(s, at_or<int>(st.alloc_per_worker, i, -1));
  }
  for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i) {
    s += ',';
    append_int(s, at_or<std::int64_t>(st.blocks_per_partition, i, 0));
  }
  s += '\n';
}

std::string decisions_csv(std::span<const sparsifiers::StepStats> steps, int workers) {
  std::string s = decisions_header(workers);
  for (const auto& st : steps) append_decisions_row(s, st, workers);
  return s;
}

std::string stats_csv(std::span<const sparsifiers::StepStats> steps, int workers) {
  std::string s =
      "iter,world_size,n_g,k_target,target_density,threshold,k_total,k_unique,density,density_"
      "error,f_t,"
      "padded_elements,global_error,bytes_allgather_counts,bytes_allgather_indices,bytes_allreduce,"
      "bytes_broadcast,bytes_alltoall,bytes_padded_elements,bytes_total,t_accumulate,t_select,t_"
      "allgather,t_"
      "allreduce,"
      "t_broadcast,t_update,t_other,t_non_comm,t_cpu,t_cpu_comm,t_select_cpu";
  for (int i = 0; i < workers; ++i) s += ",k_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",alloc_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",blocks_p" + std::to_string(i);
  s += "\n";
  for (const auto& st : steps) {
    const std::int64_t ints1[] = {st.iteration, st.world_size, st.n_g, st.k_target};
    for (auto v : ints1) append_int(s, v), s += ',';
    append_double(s, st.target_density), s += ',';
    append_double(s, st.threshold), s += ',';
    append_int(s, st.k_total), s += ',';
    append_int(s, st.k_unique), s += ',';
    append_double(s, st.density), s += ',';
    append_double(s, st.density_error), s += ',';
    append_double(s, st.f_t), s += ',';
    append_int(s, st.padded_elements), s += ',';
    append_double(s, st.global_error);
    const std::uint64_t b[] = {st.bytes.allgather_counts, st.bytes.allgather_indices,
                               st.bytes.allreduce,        st.bytes.broadcast,
                               st.bytes.alltoall,         st.bytes.padded_elements,
                               st.bytes.total()};
    for (auto v : b) s += ',', s += std::to_string(v);
    const double tm[] = {st.times.accumulate, st.times.select,     st.times.allgather,
                         st.times.allreduce,  st.times.broadcast,  st.times.update,
                         st.times.other,      st.times.non_comm(), st.times.cpu,
                         st.times.cpu_comm,   st.times.select_cpu};
    for (auto v : tm) s += ',', append_double(s, v);
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      s += ',', append_int(s, at_or<std::int64_t>(st.k_per_worker, i, 0));
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      s += ',', append_int(s, at_or<int>(st.alloc_per_worker, i, -1));
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      s += ',', append_int(s, at_or<std::int64_t>(st.blocks_per_partition, i, 0));
    s += '\n';
  }
  return s;
}

}  // namespace exdyna::sim
