// --values fp16|bf16 for every sparsifier, on the in-process group: what each worker sends is its
// acc rounded to the format, the rounding error stays in its residual (residual + sent = acc bit
// for bit), every rank gets identical results, and the value bytes halve.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/half_float.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "unit/expect_error.hpp"

using namespace exdyna;
using namespace exdyna::sparsifiers;
using core::ValueFormat;

namespace {

float grad_at(int w, std::int64_t i, int t) {
  const auto h = static_cast<std::uint64_t>(i * 131 + w * 71 + t * 29);
  float m = static_cast<float>(h % 1013 + 1) / 3000.0f;
  if ((i * 7 + w + t) % 41 == 0) m += 2.0f + 0.37f * static_cast<float>(w);
  return ((i + w * 3 + t) % 4 == 1) ? -m : m;
}

SparsifierConfig config(std::int64_t n_g, int n, int rank, ValueFormat f) {
  SparsifierConfig c;
  c.n_g = n_g;
  c.world_size = n;
  c.rank = rank;
  c.density = 0.05;
  c.values = f;
  return c;
}

struct Rec {
  std::vector<float> acc, residual, update;
  SparseResult result;
  std::uint64_t value_bytes = 0;
  std::uint64_t record_bytes = 0;  // Ok-Topk: its values travel in (index, value) records
};

// Where rank's acc went into the result: every gathered index, or (Ok-Topk) the ones it sent.
std::vector<char> sent_mask(const SparseResult& r, std::int64_t n_g) {
  std::vector<char> m(static_cast<std::size_t>(n_g), r.dense ? 1 : 0);
  for (auto i : r.partial ? r.sent : r.indices) m[i] = 1;
  return m;
}

// Runs `steps` steps of `name` on n workers; rec[rank][step].
std::vector<std::vector<Rec>> run(const std::string& name, int n, std::int64_t n_g, ValueFormat f,
                                  int steps) {
  std::vector<std::vector<Rec>> rec(static_cast<std::size_t>(n),
                                    std::vector<Rec>(static_cast<std::size_t>(steps)));
  comm::run_local(n, [&](comm::Communicator& c) {
    ErrorFeedback ef(builtin_registry().make(name, config(n_g, n, c.rank(), f)), n_g);
    std::vector<float> grad(static_cast<std::size_t>(n_g));
    for (int t = 0; t < steps; ++t) {
      auto& R = rec[static_cast<std::size_t>(c.rank())][static_cast<std::size_t>(t)];
      R.acc.resize(grad.size());
      for (std::size_t i = 0; i < grad.size(); ++i) {
        grad[i] = grad_at(c.rank(), static_cast<std::int64_t>(i), t);
        R.acc[i] = ef.residual()[i] + grad[i];
      }
      const auto stats = ef.step(grad, c);
      R.value_bytes = stats.bytes.allreduce;
      R.record_bytes = stats.bytes.alltoall + stats.bytes.allgather_indices;
      R.update = grad;
      R.residual.assign(ef.residual().begin(), ef.residual().end());
      R.result = ef.last_result();
    }
  });
  return rec;
}

struct Case {
  std::string name;
  ValueFormat format;
  int world;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::ostringstream os;
  for (char ch : info.param.name) os << (ch == '-' ? '_' : ch);
  os << "_" << core::to_string(info.param.format) << "_n" << info.param.world;
  return os.str();
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& name : builtin_registry().names())
    for (auto f : {ValueFormat::kFp16, ValueFormat::kBf16})
      for (int n : {1, 3, 4}) out.push_back({name, f, n});
  return out;
}

class Values16 : public ::testing::TestWithParam<Case> {};

TEST_P(Values16, ResidualKeepsTheRoundingErrorAndRanksAgree) {
  const Case& cs = GetParam();
  const int n = cs.world;
  const std::int64_t n_g = 1009;
  constexpr int kSteps = 4;
  const auto rec = run(cs.name, n, n_g, cs.format, kSteps);
  for (int t = 0; t < kSteps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const auto& R0 = rec[0][static_cast<std::size_t>(t)];
    EXPECT_EQ(R0.result.values_format, cs.format);
    std::vector<std::vector<char>> sent_by(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      sent_by[static_cast<std::size_t>(r)] =
          sent_mask(rec[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)].result, n_g);
    for (float v : R0.result.values)  // the sum travelled as 16-bit words
      ASSERT_EQ(core::round_to_format(v, cs.format), v);
    for (int r = 0; r < n; ++r) {
      const auto& R = rec[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)];
      const auto& sent = sent_by[static_cast<std::size_t>(r)];
      EXPECT_EQ(R.result.indices, R0.result.indices) << "rank " << r;
      EXPECT_EQ(R.result.values, R0.result.values) << "rank " << r;
      EXPECT_EQ(R.update, R0.update) << "rank " << r;
      for (std::size_t i = 0; i < sent.size(); ++i) {
        const float a = R.acc[i];
        const float s = sent[i] ? core::round_to_format(a, cs.format) : 0.0f;
        ASSERT_EQ(R.residual[i] + s, a) << "rank " << r << " element " << i;
        if (sent[i]) {
          ASSERT_EQ(R.residual[i], a - s) << "rank " << r << " element " << i;
        }
      }
    }
    // The update is the mean of the rounded values, within the rounding of the n - 1 partial
    // sums (half an ulp each, an ulp at most 2^-10 (fp16) or 2^-7 (bf16) of the sum's size).
    const double half_ulp =
        cs.format == ValueFormat::kFp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    for (std::size_t i = 0; i < static_cast<std::size_t>(n_g); ++i) {
      double sum = 0, mag = 0;
      for (int w = 0; w < n; ++w) {
        const float a = rec[static_cast<std::size_t>(w)][static_cast<std::size_t>(t)].acc[i];
        sum += sent_by[static_cast<std::size_t>(w)][i] ? core::round_to_format(a, cs.format) : 0.0f;
        mag += std::fabs(a);
      }
      ASSERT_NEAR(R0.update[i], sum / n, (half_ulp * (n - 1) + 1e-6) * mag / n + 1e-12)
          << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSparsifiers, Values16, ::testing::ValuesIn(cases()), case_name);

// The first step's selection does not depend on the format (acc = grad), so the value bytes of
// a 16-bit run are exactly half the float32 run's (Ok-Topk: its records are 6 bytes, not 8).
TEST(ValueBytes, SixteenBitValuesHalveTheValueBytes) {
  for (const auto& name : builtin_registry().names()) {
    SCOPED_TRACE(name);
    const auto a = run(name, 4, 1009, ValueFormat::kFp32, 1);
    for (auto f : {ValueFormat::kFp16, ValueFormat::kBf16}) {
      const auto b = run(name, 4, 1009, f, 1);
      ASSERT_EQ(a[0][0].result.indices, b[0][0].result.indices);
      if (name == "oktopk") {  // 6-byte records instead of 8: the values' 4 bytes become 2
        EXPECT_GT(a[0][0].record_bytes, 0u);
        EXPECT_EQ(b[0][0].record_bytes * 8, a[0][0].record_bytes * 6) << core::to_string(f);
        continue;
      }
      EXPECT_GT(a[0][0].value_bytes, 0u);
      EXPECT_EQ(b[0][0].value_bytes * 2, a[0][0].value_bytes) << core::to_string(f);
    }
  }
}

TEST(ValueFormatConfig, FingerprintNamesTheFormat) {
  auto c = config(97, 1, 0, ValueFormat::kFp32);
  EXPECT_NE(c.fingerprint().find("values=fp32"), std::string::npos);
  for (auto f : {ValueFormat::kFp16, ValueFormat::kBf16}) {
    c.values = f;
    EXPECT_NE(c.fingerprint().find(std::string("values=") + core::to_string(f)), std::string::npos);
    for (const auto& name : builtin_registry().names())
      EXPECT_NE(builtin_registry().make(name, c)->fingerprint(),
                builtin_registry().make(name, config(97, 1, 0, ValueFormat::kFp32))->fingerprint())
          << name;
  }
}

TEST(ValueFormatConfig, Fp16OverflowIsADataErrorNamingTheValue) {
  comm::run_local(1, [](comm::Communicator& c) {
    ErrorFeedback ef(builtin_registry().make("topk", config(97, 1, 0, ValueFormat::kFp16)), 97);
    std::vector<float> g(97, 0.5f);
    g[3] = 1e6f;
    expect_error<DataError>([&] { ef.step(g, c); }, {"--values fp16", "1e+06", "bf16"});
  });
}

}  // namespace
