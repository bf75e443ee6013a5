// The selection's CPU time on recorded gradients. Replays one gradient source (a trace
// or the synthetic generator) through ExDyna twice, in paper mode (Alg. 4's threshold scan, Alg. 5
// and Alg. 3) and with the exact controller (--controller exact --balance exact --worker-cap
// auto), one thread per worker over the in-process group, and compares the selection's CPU time
// per worker (StepStats::times.select_cpu: the thread's CPU clock, so W workers sharing two
// cores do not inflate it, as they do wall time).
//
// Two measurements of the same steps. "group": the times of that run, W threads on this
// machine's cores, which evict each other's caches between a worker's selection and its cut
// after the all-gather. "solo": each worker re-run alone, on one thread, its collectives served
// from a tape of the group run (sim/tape.hpp): the same steps and decisions (the player checks
// every call), with a machine to itself, as with one machine per worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exdyna/sim/simulate_config.hpp"

namespace exdyna::sim {

// One measurement's series: per iteration and repetition, the mean over workers and the max over
// workers of the select CPU time, in seconds, and their medians.
struct SelectBenchTimes {
  std::vector<double> mean_per_iteration, max_per_iteration;
  double median_mean_s = 0;
  double median_max_s = 0;
};

// One worker's step in one series: what its selection time grows with, beside that time.
struct SelectBenchStep {
  bool solo = false;  // the solo series (the least of the solo runs), else the group one
  int replay = 0;     // which replay of the mode, 0..repeat-1
  std::int64_t iteration = 0;
  int worker = 0;
  std::int64_t partition = 0;   // StepStats::own_partition
  std::int64_t candidates = 0;  // StepStats::own_candidates (exact controller; else 0)
  std::int64_t kept = 0;        // k_i
  double select_cpu_s = 0;
};

struct SelectBenchMode {
  std::string name;              // "paper" or "exact"
  SelectBenchTimes group, solo;  // solo: empty when not measured
  double mean_density = 0;       // k' / (d n_g) over the run (a check that both modes ran as meant)
  std::vector<SelectBenchStep> steps;  // every worker's every step, group and solo series
};

struct SelectBenchResult {
  SelectBenchMode paper, exact;
  bool solo = false;  // whether the solo series were measured
  // An empty lap of the thread CPU clock in this run (core::thread_cpu_lap_cost), and the laps
  // each step's select time holds (both modes): about laps * clock_lap_s of every median is the
  // clock's own cost, which pulls the ratios toward 1.
  double clock_lap_s = 0;
  int laps_per_step = 0;
  double ratio_mean() const { return exact.group.median_mean_s / paper.group.median_mean_s; }
  double ratio_max() const { return exact.group.median_max_s / paper.group.median_max_s; }
  double solo_ratio_mean() const { return exact.solo.median_mean_s / paper.solo.median_mean_s; }
  double solo_ratio_max() const { return exact.solo.median_max_s / paper.solo.median_max_s; }
  // The ratio of the means over workers with the clock's cost taken off both medians; 0 where
  // the paper mode's median does not exceed that cost (nothing left to compare).
  double net_ratio_mean(bool solo_series) const;
};

struct SelectBenchOptions {
  int repeat = 3;     // replays of each mode (group runs), alternating; >= 1
  bool solo = true;   // also re-run each worker alone from its tape
  int solo_runs = 3;  // re-runs of each worker per replay, >= 1: the solo series keep, per
                      // worker and iteration, the least CPU time of them (the step's work is the
                      // same every time; what another tenant of the machine adds only lengthens)
};

// cfg: the source, workers, iterations and density as for `exdyna simulate` (its sparsifier
// options are replaced by each mode's).
SelectBenchResult bench_select(const SimulateConfig& cfg, const SelectBenchOptions& opt);

// The steps of both modes as CSV, one row per worker and step (header: mode, series, replay,
// iteration, worker, partition, candidates, kept, select_cpu_us): what
// scripts/select_cost_model.py fits the per-worker cost model on.
std::string select_steps_csv(const SelectBenchResult& r);

}  // namespace exdyna::sim
