// The list of StepStats fields: every member is in it under its one name, values read exactly.
#include "exdyna/sparsifiers/step_stats_fields.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <variant>

namespace exdyna::sparsifiers {
namespace {

constexpr std::int64_t kBeyondDouble = (std::int64_t{1} << 53) + 1;  // not a double: exactness

// A StepStats whose every member holds a value of its own. The structured bindings name every
// member: a member added to StepStats, ByteCounts or PhaseTimes stops this compiling until it is
// named here, and then ColumnsAreTheMembersUnderTheirNames fails until the list has it.
StepStats distinct_stats() {
  StepStats s;
  auto& [iteration, world_size, n_g, k_target, target_density, threshold, k_per_worker, k_total,
         k_unique, density, density_error, f_t, padded_elements, global_error, alloc_per_worker,
         blocks_per_partition, own_partition, own_candidates, fused, non_finite, step_scale, bytes,
         times] = s;
  iteration = 11, world_size = 3, n_g = kBeyondDouble, k_target = 13;
  target_density = 0.1, threshold = 0.2, density = 0.3, density_error = 0.4, f_t = 1.5;
  global_error = 0.6;
  k_total = 17, k_unique = 19, padded_elements = 23, own_partition = 29, own_candidates = 31;
  fused = 37, non_finite = 41, step_scale = 0.7;
  k_per_worker = {101, 102, 103}, alloc_per_worker = {2, 0}, blocks_per_partition = {201};
  auto& [counts, indices, allreduce, broadcast, alltoall, padded, collectives] = bytes;
  counts = 1001, indices = 1002, allreduce = 1003, broadcast = 1004, alltoall = 1005;
  padded = 1006, collectives = 1007;
  auto& [accumulate, select, allgather, t_allreduce, t_broadcast, update, other, cpu, cpu_comm,
         select_cpu] = times;
  accumulate = 0.011, select = 0.012, allgather = 0.013, t_allreduce = 0.014;
  t_broadcast = 0.015, update = 0.016, other = 0.017, cpu = 0.018, cpu_comm = 0.019;
  select_cpu = 0.020;
  return s;
}

TEST(StepStatsFields, ColumnsAreTheMembersUnderTheirNames) {
  const StatValue i = std::int64_t{}, d = 0.0;  // the kind each column must have
  const std::map<std::string, std::pair<StatValue, StatValue>> want = {
      {"iteration", {i, std::int64_t{11}}},
      {"world_size", {i, std::int64_t{3}}},
      {"n_g", {i, kBeyondDouble}},
      {"k_target", {i, std::int64_t{13}}},
      {"target_density", {d, 0.1}},
      {"threshold", {d, 0.2}},
      {"k_total", {i, std::int64_t{17}}},
      {"k_unique", {i, std::int64_t{19}}},
      {"density", {d, 0.3}},
      {"density_error", {d, 0.4}},
      {"f_t", {d, 1.5}},
      {"padded_elements", {i, std::int64_t{23}}},
      {"collectives", {i, std::int64_t{1007}}},
      {"global_error", {d, 0.6}},
      {"own_partition", {i, std::int64_t{29}}},
      {"own_candidates", {i, std::int64_t{31}}},
      {"step_scale", {d, 0.7}},
      {"fused", {i, std::int64_t{37}}},
      {"non_finite", {i, std::int64_t{41}}},
      {"bytes_allgather_counts", {i, std::int64_t{1001}}},
      {"bytes_allgather_indices", {i, std::int64_t{1002}}},
      {"bytes_allreduce", {i, std::int64_t{1003}}},
      {"bytes_broadcast", {i, std::int64_t{1004}}},
      {"bytes_alltoall", {i, std::int64_t{1005}}},
      {"bytes_padded_elements", {i, std::int64_t{1006}}},
      {"bytes_total", {i, std::int64_t{1001 + 1002 + 1003 + 1004 + 1005}}},
      {"t_accumulate", {d, 0.011}},
      {"t_select", {d, 0.012}},
      {"t_allgather", {d, 0.013}},
      {"t_allreduce", {d, 0.014}},
      {"t_broadcast", {d, 0.015}},
      {"t_update", {d, 0.016}},
      {"t_other", {d, 0.017}},
      {"t_non_comm", {d, 0.011 + 0.012 + 0.016 + 0.017}},
      {"t_cpu", {d, 0.018}},
      {"t_cpu_comm", {d, 0.019}},
      {"t_select_cpu", {d, 0.020}},
  };
  const auto columns = step_scalar_columns();
  const auto values = step_scalar_values(distinct_stats());
  ASSERT_EQ(columns.size(), values.size());
  std::set<std::string> seen;
  for (std::size_t c = 0; c < columns.size(); ++c) {
    EXPECT_TRUE(seen.insert(columns[c]).second) << columns[c] << " twice";
    const auto w = want.find(columns[c]);
    ASSERT_NE(w, want.end()) << "a column the test does not know: " << columns[c];
    EXPECT_EQ(values[c].index(), w->second.first.index()) << columns[c] << ": integer or double";
    EXPECT_EQ(values[c], w->second.second) << columns[c];
  }
  EXPECT_EQ(seen.size(), want.size()) << "a member the list does not read";
}

TEST(StepStatsFields, PerWorkerColumnsFillMissingEntries) {
  const auto columns = step_stat_columns(3);
  const auto values = step_stat_values(distinct_stats(), 3);
  ASSERT_EQ(columns.size(), values.size());
  const std::size_t first = step_scalar_columns().size();
  const std::vector<std::string> names = {"k_w0",      "k_w1",      "k_w2",
                                          "alloc_w0",  "alloc_w1",  "alloc_w2",
                                          "blocks_p0", "blocks_p1", "blocks_p2"};
  const std::vector<std::int64_t> want = {101, 102, 103, 2, 0, -1, 201, 0, 0};
  ASSERT_EQ(columns.size(), first + names.size());
  for (std::size_t j = 0; j < names.size(); ++j) {
    EXPECT_EQ(columns[first + j], names[j]);
    EXPECT_EQ(values[first + j], StatValue(want[j])) << names[j];
  }
}

TEST(StepStatsFields, GroupsAndPerWorkerFieldsReadTheMembers) {
  const auto s = distinct_stats();
  std::vector<std::string> groups, per_worker;
  for (const auto& g : step_field_groups()) groups.emplace_back(g.name);
  for (const auto& f : step_per_worker_fields()) {
    per_worker.emplace_back(f.name);
    EXPECT_FALSE(f.description.empty()) << f.name;
  }
  EXPECT_EQ(groups, (std::vector<std::string>{"bytes", "times"}));
  EXPECT_EQ(per_worker,
            (std::vector<std::string>{"k_per_worker", "alloc_per_worker", "blocks_per_partition"}));
  EXPECT_EQ(step_per_worker_fields()[0].read(s), s.k_per_worker);
  EXPECT_EQ(step_per_worker_fields()[1].read(s), (std::vector<std::int64_t>{2, 0}));
  for (const auto& f : step_scalar_fields()) EXPECT_FALSE(f.description.empty()) << f.name;
  for (const auto& g : step_field_groups())
    for (const auto& f : g.fields) EXPECT_FALSE(f.description.empty()) << g.name << f.name;
}

TEST(StepStatsFields, AsDoubleKeepsTheKind) {
  EXPECT_EQ(stat_as_double(StatValue(std::int64_t{7})), 7.0);
  EXPECT_EQ(stat_as_double(StatValue(0.25)), 0.25);
}

}  // namespace
}  // namespace exdyna::sparsifiers
