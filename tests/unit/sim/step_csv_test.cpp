// The stats CSV of `exdyna simulate`: its columns are the list of StepStats fields, and every value
// reads back exactly (integers beyond a double's 53 bits, doubles to the last bit).
#include "exdyna/sim/step_csv.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "exdyna/sparsifiers/step_stats_fields.hpp"

namespace exdyna::sim {
namespace {

using sparsifiers::StatValue;

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, ',');) out.push_back(f);
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

sparsifiers::StepStats step(std::int64_t t) {
  sparsifiers::StepStats s;
  s.iteration = t;
  s.world_size = 2;
  s.n_g = (std::int64_t{1} << 53) + 1 + t;
  s.k_target = 1000;
  s.target_density = 0.1;
  s.threshold = 1.0 / 3.0 + static_cast<double>(t);
  s.k_per_worker = {400, 601 + t};
  s.alloc_per_worker = {1, 0};
  s.blocks_per_partition = {7};  // fewer than workers: the rest are written as 0
  s.finish_counts();
  s.global_error = std::nan("");
  s.bytes.allgather_indices = (std::uint64_t{1} << 60) + 3;
  s.times.select = 0.1 + 0.2;
  s.times.cpu = 1e-300;
  return s;
}

TEST(StatsCsv, HeaderIsTheListOfFields) {
  const std::vector<sparsifiers::StepStats> steps = {step(0)};
  const auto rows = lines(stats_csv(steps, 2));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(split(rows[0]), sparsifiers::step_stat_columns(2));
  EXPECT_EQ(split(rows[0]).front(), "iteration");
}

TEST(StatsCsv, ValuesRoundTrip) {
  const std::vector<sparsifiers::StepStats> steps = {step(0), step(5)};
  const auto rows = lines(stats_csv(steps, 2));
  ASSERT_EQ(rows.size(), 3u);
  for (std::size_t r = 0; r < steps.size(); ++r) {
    const auto fields = split(rows[r + 1]);
    const auto want = sparsifiers::step_stat_values(steps[r], 2);
    const auto columns = sparsifiers::step_stat_columns(2);
    ASSERT_EQ(fields.size(), want.size());
    for (std::size_t c = 0; c < want.size(); ++c) {
      if (const auto* i = std::get_if<std::int64_t>(&want[c])) {
        EXPECT_EQ(std::stoll(fields[c]), *i) << columns[c];
        continue;
      }
      const double v = std::get<double>(want[c]), got = std::strtod(fields[c].c_str(), nullptr);
      if (std::isnan(v))
        EXPECT_TRUE(std::isnan(got)) << columns[c] << " = " << fields[c];
      else
        EXPECT_EQ(got, v) << columns[c];
    }
  }
}

TEST(StatsCsv, DecisionsKeepTheirFormat) {
  // The decisions file is compared byte for byte across versions: this is what the writer printed
  // before the list of fields existed.
  EXPECT_EQ(decisions_header(2),
            "iter,threshold,k_total,density,f_t,k_w0,k_w1,alloc_w0,alloc_w1,blocks_p0,blocks_p1\n");
  std::string row;
  append_decisions_row(row, step(0), 2);
  EXPECT_EQ(row,
            "0,0.33333333333333331,1001,1.1113332476497817e-13,1.2007992007992008,400,601,1,0,"
            "7,0\n");
}

}  // namespace
}  // namespace exdyna::sim
