// The scale model: alpha-beta costs of each collective fitted on each emulated link,
// per-element non-communication costs fitted per sparsifier label, and from them the iteration
// time of every label for worker counts and link rates that were not measured.
//
// Cost forms for W ranks, m bytes per rank (alpha: latency per message, beta: seconds per byte):
//   all-reduce  (ring: reduce-scatter + all-gather; gloo::allreduce's default)
//               2(W-1) alpha + 2(W-1)/W m beta
//   all-gather  (ring, gloo::allgather / allgatherv)          (W-1) alpha + (W-1) m beta
//   broadcast   (binomial tree, gloo::broadcast: the whole message in each of ceil(log2 W) rounds)
//               ceil(log2 W) (alpha + m beta)
// and, where the engine ran them below its algorithm switch (comm.csv's algorithm column):
//   all-reduce  (bcube: reduce-scatter and all-gather of ceil(log2 W) rounds each)
//               2 ceil(log2 W) alpha + 2(W-1)/W m beta
//   all-gather  (Bruck)                                      ceil(log2 W) alpha + (W-1) m beta
// Each sweep point is fitted under the form of the algorithm that ran it; a prediction takes the
// cheaper of the op's forms the sweep saw, as the engine's switch does.
// alpha and beta are fitted by least squares on relative residuals (so 4 KiB calls, which fix
// alpha, weigh as much as 64 MiB calls, which fix beta), per (op, bandwidth, delay); an op whose
// sweep does not pin beta takes the link's beta from another op (LinkFit::beta_from). At a rate
// that was not measured, beta is the nearest measured rate's beta scaled by the rate ratio, i.e.
// the fitted link efficiency (wire time per byte / fitted beta) is assumed to carry over; alpha is
// kept.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "exdyna/eval/measurements.hpp"

namespace exdyna::eval {

enum class CostForm {
  kRingAllreduce,
  kRingAllgather,
  kBinomialBroadcast,
  kPairwiseAlltoall,
  kBcubeAllreduce,
  kBruckAllgather
};

// allreduce -> ring all-reduce (bcube: bcube all-reduce), allgather-padded / allgather-exact ->
// ring all-gather (bruck: Bruck all-gather), broadcast -> binomial broadcast, alltoall -> pairwise
// exchange (W - 1 rounds; its size is what one rank sends in all); anything else throws DataError
// naming the op or the algorithm.
CostForm cost_form(std::string_view op, std::string_view algorithm = "ring");
// Seconds of one call under the form.
double collective_time(CostForm form, double alpha_s, double beta_s_per_byte, int workers,
                       double bytes_per_rank);

struct LinkFit {
  std::string op;
  int workers = 0;  // 0: pooled over every W (the link's fit); else alpha at this W alone
  // 0: fitted over every size; else over the sizes from this many bytes per rank up, and used
  // for calls of at least that size (see fit_alpha_per_workers).
  double min_bytes = 0;
  double bandwidth_bps = 0, delay_us = 0;
  double alpha_s = 0, beta_s_per_byte = 0;
  double link_efficiency = 0;  // (8 / bandwidth_bps) / beta: the share of the wire rate achieved
  int points = 0;              // sweep points the fit kept (outliers dropped)
  double rel_rms = 0;  // root mean square of (fitted - measured) / measured over those points
  // Empty when beta was fitted from this op's own sweep; else the op on the same link whose beta
  // was taken (this op's sizes did not pin it, or gave a beta faster than the wire).
  std::string beta_from;
  // The log-round algorithm the engine ran at some sizes of this op ("bcube", "bruck"; empty:
  // the ring only); predictions take the cheaper of the two forms.
  std::string log_algorithm;
};

// Where W ranks share fewer cores than W (emulated hosts on one machine), a call's latency grows
// with W beyond (W-1) alpha (each rank waits to be scheduled), and so does its time per byte (W
// ranks copy and sum through the same cores; at 10 Gbit/s the cores, not the link, are the limit).
// For each pooled fit and each W of its sweep, alpha and beta refitted at that W alone
// (LinkFit::workers = W); where that W's sizes do not pin beta, the pooled beta is kept. And where
// that W's sweep has at least 3 sizes of kLargeMessageBytes or more, a second fit over those
// alone (LinkFit::min_bytes), for calls that large: on emulated links time against size is not
// one straight line (at 10 Gbit/s the cores limit large calls, the scheduler small ones), and
// a single relative least-squares line that serves 4 KiB counts misjudges the slope that a
// 100 MB dense all-reduce needs.
inline constexpr double kLargeMessageBytes = 1 << 20;
std::vector<LinkFit> fit_alpha_per_workers(const std::vector<CommPoint>& points,
                                           const std::vector<LinkFit>& pooled);

// One fit per (op, bandwidth, delay) present in comm.csv. Robust to a stalled sweep point: points
// more than 3x the median relative residual off (and over 10 %) are dropped and the fit redone.
std::vector<LinkFit> fit_links(const std::vector<CommPoint>& points);

// Non-communication costs of one label. Selection scans n_g / W elements for ExDyna's partition,
// n_g for the others (the cells take, per iteration, the slowest rank: for CLT-k the leader), and
// for the sparsifiers that all-gather their lists it also merges them into their union, which
// grows with G, the values gathered per iteration (k' = the sum of the k_i: with W for the Top-k-
// like labels, the build-up, and with their overshoot of the density), merged pairwise in
// ceil(log2 W) rounds. So at each density the selection is fitted over the label's cells at the W
// measured as s_per_element x elements + s_per_value x G ceil(log2 W) (x G for the labels whose
// lists are not merged; only the first where that hardly moves with W: the two would not separate;
// the number of values a selection keeps changes its cost per element too: Top-k's heap, the
// ladders' candidates). The rest (accumulate, update, bookkeeping) is fitted over all the
// label's cells as rest_s_per_element x n_g + rest_s_per_value x G (the update's scatter).
struct SelectCost {
  double density = 0, s_per_element = 0, s_per_value = 0;
};
struct LabelCost {
  std::string label, sparsifier;
  double select_s_per_element = 0;  // median over every cell of select / elements (the report's)
  std::vector<SelectCost> select_by_density;
  double rest_s_per_element = 0, rest_s_per_value = 0, compute_ms = 0;
  int points = 0;
  // The selection's costs fitted at the density nearest to d (log scale).
  SelectCost select_at(double density) const;
};

// Elements the measured selection time of `sparsifier` covers at W workers (the cells' select_ms
// is the slowest rank's per iteration, so the same as on the critical path).
double measured_select_elements(std::string_view sparsifier, int workers, double n_g);
// Elements one iteration's selection puts on the critical path: n_g / W for ExDyna, n_g for the
// others (CLT-k's leader selects over all of n_g while the others wait at the broadcast).
double critical_select_elements(std::string_view sparsifier, int workers, double n_g);

// The exchange of a label at one measured (W, d): how many values workers send relative to k,
// the padding, the union's overlap. Means over the label's cells at that (W, d).
struct ExchangeShape {
  double density_ratio = 1;  // k' / k
  double f_t = 1;            // W max k_i / k'
  double unique_ratio = 1;   // k_unique / k' (values in the all-reduce per value sent)
  double counts_bytes_per_rank = 8;
  double fused_share = 0;  // iterations whose counts and indices went in one all-gather
};

struct Prediction {
  double compute_ms = 0, select_ms = 0, non_comm_ms = 0, comm_ms = 0, iter_ms = 0;
  double allgather_ms = 0, allreduce_ms = 0, broadcast_ms = 0;
};

// Which collective fit a prediction uses: the link's pooled alpha-beta (the scale model proper,
// also for W that were not measured), or where this W was measured at this rate the alpha and beta
// fitted at this W (what the emulation's links did there, core sharing included).
// kStated: the link's fitted beta with a stated per-message latency instead of the fitted alpha
// (ScaleModel::stated_alpha_s): the emulation's alpha is mostly W processes waiting for 2 shared
// cores, which grows with W and would not carry over to W machines.
enum class Latency { kPooled, kAtMeasuredWorkers, kStated };

// The stated per-message latency of kStated: one small TCP message between two machines on a
// datacenter network (kernel stack both ends, a switch or two), as Gloo sends it.
inline constexpr double kStatedAlphaS = 30e-6;

class ScaleModel {
 public:
  // series: each cell's stats.csv where available (for k_unique / k' and the counts' size).
  static ScaleModel fit(const std::vector<CommPoint>& comm, const std::vector<MeasuredCell>& cells,
                        const std::map<CellKey, CellSeries>& series = {});

  // The iteration time of `label` at W workers on a link of `bandwidth_bps`, target density d and
  // n_g elements. Throws Error when the label has no measured cell or no link was fitted.
  Prediction predict(const std::string& label, int workers, double bandwidth_bps, double density,
                     double n_g, Latency latency = Latency::kPooled) const;
  // Seconds of one call of `op` with `bytes` per rank; a missing op borrows the link's beta and
  // alpha from another op fitted on the same link (the link, not the op, sets them).
  double collective_s(std::string_view op, int workers, double bandwidth_bps, double bytes,
                      Latency latency = Latency::kPooled) const;

  const std::vector<LinkFit>& links() const { return links_; }
  const std::vector<LinkFit>& alpha_per_workers() const { return per_w_; }
  const std::vector<LabelCost>& costs() const { return costs_; }
  std::vector<std::string> labels() const;

  // model.csv for W = 2, 4, ..., 256 at 1, 10, 100 Gbit/s, each measured (label, density, n_g):
  // pred_* with the fitted alpha (kPooled), stated_* with kStatedAlphaS (kStated).
  std::string model_csv() const;
  // model_fit.csv: one row per link fit, then one per label.
  std::string fit_csv() const;

 private:
  struct ShapeAt {
    std::string label;
    int workers;
    double density;
    ExchangeShape s;
  };
  const LinkFit& link(std::string_view op, double bandwidth_bps) const;
  // The measured shape nearest to (W, d): nearest density, then nearest W, then the larger W.
  const ShapeAt& shape(const std::string& label, int workers, double density) const;
  const LabelCost& cost(const std::string& label) const;

  // k' / k of `label` at (W, d): the measured shape's, Top-k-like labels scaled by W / W_measured
  // (every worker sends its own k: the build-up grows with W).
  double sent_ratio(const std::string& label, int workers, double density) const;

  std::vector<LinkFit> links_, per_w_;
  std::vector<LabelCost> costs_;
  std::vector<ShapeAt> shapes_;
  std::vector<MeasuredCell> cells_;
};

// The model against the measurement at every measured cell: (predicted - measured) / measured.
struct ModelError {
  MeasuredCell cell;
  Prediction pred;
  double rel_error = 0;
};
std::vector<ModelError> model_errors(const ScaleModel& model,
                                     const std::vector<MeasuredCell>& cells,
                                     Latency latency = Latency::kPooled);

}  // namespace exdyna::eval
