// The network part of `exdyna compare`: for each network setting (W hosts, bandwidth B) a
// collective sweep (comm.csv), then every cell (sparsifier variant, W, B, density d) as W ranks of
// `exdyna simulate --backend gloo` inside emulated hosts (hosts.hpp), or, with the model network,
// in one process over the in-process group with the collectives' times from the alpha-beta model.
//
// Iteration time of a cell = compute_ms + non_comm_ms + comm_ms, where
//   non_comm_ms  the stepping thread's CPU time per step, of the slowest rank, in the cheapest
//                measured iteration (best of N, leaving out one-time costs): W ranks on fewer
//                cores inflate the wall time of the non-communication phases, not their CPU time;
//   comm_ms      for each collective the step made (its bytes from the cell's statistics), the
//                time the sweep measured for that operation and size on the same shaped links
//                (interpolated between sizes). The cell's own collectives' wall times include
//                waiting for ranks delayed by core sharing, so they are kept in cell.json as
//                comm_wall_ms but not used.
// The simulate run of a cell is shared by the cells that differ only in the bandwidth (see
// MatrixOptions::share_across_bandwidths): on two cores it is the expensive part, and nothing it
// measures depends on the link.
// A finished cell leaves cells/<name>/cell.json; a rerun keeps it and skips the cell when its
// parameters match (resume). cells.csv is rewritten from the cell.json files after every cell.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace exdyna::eval {

// A column of the comparison: a registry sparsifier with its options.
struct Variant {
  std::string label;              // dense, topk, ..., exdyna-paper, exdyna-exact
  std::string sparsifier;         // the registry name
  std::vector<std::string> args;  // extra `exdyna simulate` options
};

// The default labels, in the report's order.
const std::vector<std::string>& default_labels();
// The variant of a label; throws InvalidArgument naming it (option --sparsifiers) when unknown.
Variant variant_for(const std::string& label);

// `exdyna simulate` options for the cells of one registry sparsifier.
struct ExtraArgs {
  std::string sparsifier;  // empty: every cell
  std::vector<std::string> args;
};

// The extra options of o that apply to the cells of variant v, in o's order.
std::vector<std::string> extra_args_for(const std::vector<ExtraArgs>& extra, const Variant& v);

struct MatrixOptions {
  std::filesystem::path exdyna;   // the `exdyna` binary the ranks run
  std::filesystem::path out_dir;  // DIR
  std::vector<std::string> labels = default_labels();
  std::vector<int> workers{2, 4, 8};
  std::vector<std::uint64_t> bandwidths{1'000'000'000, 10'000'000'000};
  std::vector<double> densities{0.01, 0.001};
  std::int64_t n_grad = 25'600'000;  // synthetic source (ResNet-50-sized)
  std::filesystem::path trace_dir;   // non-empty: replay this trace instead
  double compute_ms = 0;             // forward + backward time added to every iteration
  // Iterations run but not measured; -1: auto (warmup_for).
  int warmup = -1;
  int iterations = 3;  // measured iterations per cell (the median counts)
  double delay_us = 50;
  double loss_pct = 0;
  bool emulated = true;  // false: --network model
  // Options appended to the simulate command of the cells they apply to (compare's sparsifier
  // options: --gather to every cell, the ExDyna options to the exdyna cells, ...).
  std::vector<ExtraArgs> extra_simulate_args;
  double timeout_s = 120;  // per collective; a cell's deadline is derived
  int sweep_iters = 5;     // timed calls per size in the collective sweep (their median counts)
  // ... below 1 MiB: calls there cost milliseconds, and with W ranks on 2 cores one call is mostly
  // a scheduler's wake-up (5 calls of a 16 KB all-gather: 1-5 ms at 4 hosts).
  int sweep_small_iters = 21;
  // Cells that differ only in the bandwidth share one simulate run (the first bandwidth's): its
  // CPU times and bytes do not depend on the link; each bandwidth has its own sweep.
  bool share_across_bandwidths = true;
};

struct CellSpec {
  Variant variant;
  int workers = 0;
  std::uint64_t bandwidth_bps = 0;
  double density = 0;        // 1 for dense
  std::string name() const;  // <label>-w<W>-b<rate>[-d<d>]
};

// The warm-up iterations of a cell: o.warmup, or with auto W + 1 for the sparsifiers whose work
// rotates over the workers, ExDyna (partitions) and CLT-k (the leader), and 2 for the others (at
// n_g = 25.6M a rank's CPU time per step falls over its first 2-3 iterations; the median of the
// measured ones sets aside a third that is still slow). A
// worker's first turn at a role costs it more (its buffers grow: CLT-k's leader ~0.75 s of CPU the
// first time, ~0.15 s later, at 25.6M), and the slowest worker sets an iteration's pace.
int warmup_for(const MatrixOptions& o, const CellSpec& c);

// The cells in run order: per bandwidth, per W, the variants x densities; dense once per (W, B).
std::vector<CellSpec> plan_cells(const MatrixOptions& o);

// Measured time of each collective by size, for one network setting.
class CommTable {
 public:
  void add(const std::string& op, double bytes, double time_s);
  bool has(const std::string& op) const { return points_.count(op) > 0; }
  // Time of one call moving `bytes` per rank: 0 for 0 bytes, the smallest size's time below it,
  // linear between sizes, extrapolated from the two largest above; over the sizes that no larger
  // size beat (without_stalls: a point slower than a larger call was stalled).
  double time_s(const std::string& op, double bytes) const;
  // The Gloo engine's algorithm switch the setting's sweep measured at start-up
  // (EXDYNA_GLOO_LOG_BELOW's "ALLREDUCE,ALLGATHER" bytes); the cells take it instead of measuring
  // their own, so they run the algorithms the sweep timed. Empty: the cells measure.
  std::string gloo_log_below;

 private:
  std::map<std::string, std::map<double, double>> points_;  // as measured
  std::map<std::string, std::map<double, double>> kept_;    // without_stalls of each op's points
};

// The alpha-beta model of the collectives used without emulated hosts (--network model): ring
// all-reduce 2(W-1)(alpha + b/(W B)), ring all-gather (W-1)(alpha + b/B), binomial broadcast
// ceil(log2 W)(alpha + b/B), alpha = the delay + 20 us of software latency.
double model_collective_s(const std::string& op, int workers, std::uint64_t bps, double delay_us,
                          double bytes);

struct MatrixResult {
  int ran = 0, kept = 0, failed = 0;
  std::vector<std::string> failures;  // "<cell>: <why>"
  double wall_s = 0;
};

using MatrixProgress = std::function<void(const std::string&)>;

// Runs the matrix into o.out_dir. Cells that fail are reported and the matrix goes on; an error in
// setting up the hosts throws.
MatrixResult run_matrix(const MatrixOptions& o, const MatrixProgress& progress);

// The header of cells.csv (the spec's columns).
const std::string& cells_csv_header();

// Rewrites out_dir/cells.csv from the cell.json files of `cells` present under out_dir/cells
// (dense rows are repeated once per density in `densities`). Returns the number of rows.
int write_cells_csv(const std::filesystem::path& out_dir, const std::vector<CellSpec>& cells,
                    const std::vector<double>& densities);

}  // namespace exdyna::eval
