// Fixtures for the eval tests: a tiny measured matrix written from known costs, so the expected
// fastest label and the model's parameters follow from the inputs.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "exdyna/eval/scale_model.hpp"

namespace exdyna::eval::testing {

// The `exdyna` tool: $EXDYNA_TOOL, else build/exdyna seen from build/tests/eval/<this test>.
inline std::filesystem::path exdyna_tool() {
  if (const char* t = std::getenv("EXDYNA_TOOL")) return t;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto tool = self.parent_path().parent_path().parent_path() / "exdyna";
  return !ec && std::filesystem::exists(tool) ? tool : std::filesystem::path();
}

inline void write(const std::filesystem::path& p, const std::string& s) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

// Known link: alpha 60 us, 1 Gbit/s at 94 % (117.5 MB/s effective).
constexpr double kAlpha = 60e-6;
constexpr double kBeta = 1.0 / 117.5e6;

// comm.csv for one link from the cost forms, sizes 4 KiB .. 64 MiB per rank, W = 2, 4, 8.
inline std::string synthetic_comm(double bandwidth_bps, double alpha, double beta) {
  std::ostringstream os;
  os << "workers,bandwidth_bps,delay_us,op,bytes,time_s\n";
  for (const char* op : {"allreduce", "allgather-padded", "allgather-exact", "broadcast"})
    for (int w : {2, 4, 8})
      for (double m = 4096; m <= 64.0 * 1024 * 1024; m *= 4)
        os << w << ',' << bandwidth_bps << ",50," << op << ',' << m << ','
           << collective_time(cost_form(op), alpha, beta, w, m) << '\n';
  return os.str();
}

struct FixtureCell {
  std::string sparsifier, label;
  int workers;
  double bandwidth, density, iter_ms, select_ms, comm_ms, density_ratio, f_t;
  double collectives = NAN;  // calls per iteration; NaN: the field is left empty
  double fused = NAN;        // the fused all-gather's share of iterations; NaN: left empty
};

inline std::string cells_csv(const std::vector<FixtureCell>& cells) {
  std::ostringstream os;
  os << "sparsifier,label,workers,bandwidth_bps,delay_us,density,n_g,iterations,compute_ms,iter_"
        "ms,non_comm_ms,select_ms,comm_ms,allgather_ms,allreduce_ms,broadcast_ms,bytes_per_iter,"
        "density_ratio,f_t,global_error,collectives_per_iter,fused_share\n";
  for (const auto& c : cells) {
    const double compute = 5, non_comm = c.iter_ms - compute - c.comm_ms;
    os << c.sparsifier << ',' << c.label << ',' << c.workers << ',' << c.bandwidth << ",50,"
       << c.density << ",1000000,20," << compute << ',' << c.iter_ms << ',' << non_comm << ','
       << c.select_ms << ',' << c.comm_ms << ',' << c.comm_ms / 2 << ',' << c.comm_ms / 2
       << ",0,40000," << c.density_ratio << ',' << c.f_t << ",nan,"
       << (std::isnan(c.collectives) ? std::string() : std::to_string(c.collectives)) << ','
       << (std::isnan(c.fused) ? std::string() : std::to_string(c.fused)) << "\n";
  }
  return os.str();
}

// A stats.csv of `iters` iterations in the simulate format (the columns the report reads): target
// density `target`, actual density settling from 1.3 ratio x target to ratio x target.
inline std::string stats_csv(int iters, double target, double ratio, double f_t, double threshold) {
  const double density = target * ratio;
  std::ostringstream os;
  os << "iteration,world_size,n_g,k_target,target_density,threshold,k_total,k_unique,density,"
        "density_"
        "error,f_t,padded_elements,global_error,bytes_allgather_counts,bytes_allgather_indices,"
        "bytes_allreduce,bytes_broadcast,bytes_padded_elements,bytes_total,t_accumulate,t_select,"
        "t_allgather,t_allreduce,t_broadcast,t_update,t_other,t_non_comm\n";
  for (int i = 0; i < iters; ++i) {
    const double d = density * (1.0 + 0.3 * std::exp(-i / 5.0));
    os << i << ",2,1000000,1000," << target << ',' << threshold * (1 + 0.01 * i) << ',' << d * 1e6
       << ',' << d * 1e6 << ',' << d << ",0," << f_t << ",10," << 0.5 + 0.4 * std::exp(-i / 7.0)
       << ",16,8000,8000,0,40,16016,0.001,0.002,0.003,0.004,0,"
       << "0.0005,0.0001,0.0036\n";
  }
  return os.str();
}

}  // namespace exdyna::eval::testing
