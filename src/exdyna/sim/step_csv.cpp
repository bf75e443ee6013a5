#include "exdyna/sim/step_csv.hpp"

#include <cstdint>
#include <cstdio>
#include <variant>
#include <vector>

#include "exdyna/sparsifiers/step_stats_fields.hpp"

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
  for (const auto& f : sparsifiers::step_per_worker_fields())
    for (int i = 0; i < workers; ++i) s += ',', s += f.column_prefix, s += std::to_string(i);
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
  for (const auto& f : sparsifiers::step_per_worker_fields()) {
    const auto v = f.read(st);
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      s += ',', append_int(s, at_or<std::int64_t>(v, i, f.missing));
  }
  s += '\n';
}

std::string decisions_csv(std::span<const sparsifiers::StepStats> steps, int workers) {
  std::string s = decisions_header(workers);
  for (const auto& st : steps) append_decisions_row(s, st, workers);
  return s;
}

std::string stats_csv(std::span<const sparsifiers::StepStats> steps, int workers) {
  std::string s;
  const char* sep = "";
  for (const auto& c : sparsifiers::step_stat_columns(workers)) s += sep, s += c, sep = ",";
  s += '\n';
  for (const auto& st : steps) {
    sep = "";
    for (const auto& v : sparsifiers::step_stat_values(st, workers)) {
      s += sep, sep = ",";
      if (const auto* i = std::get_if<std::int64_t>(&v))
        append_int(s, *i);
      else
        append_double(s, std::get<double>(v));
    }
    s += '\n';
  }
  return s;
}

}  // namespace exdyna::sim
