#include "exdyna/eval/scale_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna_options.hpp"

namespace exdyna::eval {

namespace {

int ceil_log2(int w) {
  int r = 0;
  while ((1 << r) < w) ++r;
  return r;
}

// The two regressors of t = xa * alpha + xb * beta under a form.
std::pair<double, double> regressors(CostForm form, int w, double m) {
  const double W = w;
  switch (form) {
    case CostForm::kRingAllreduce:
      return {2 * (W - 1), 2 * (W - 1) / W * m};
    case CostForm::kRingAllgather:
      return {W - 1, (W - 1) * m};
    case CostForm::kBinomialBroadcast: {
      const double r = ceil_log2(w);
      return {r, r * m};
    }
    case CostForm::kPairwiseAlltoall:  // W - 1 rounds of m / W (m: what one rank sends in all)
      return {W - 1, (W - 1) / W * m};
    case CostForm::kBcubeAllreduce:
      return {2 * ceil_log2(w), 2 * (W - 1) / W * m};
    case CostForm::kBruckAllgather:
      return {ceil_log2(w), (W - 1) * m};
  }
  return {0, 0};
}

bool is_exdyna(std::string_view s) {
  return s == "exdyna";
}
bool is_topk_like(std::string_view s) {
  return s != "dense" && s != "cltk" && s != "randomk" && s != "oktopk" && !is_exdyna(s);
}

double log_distance(double a, double b) {
  return std::abs(std::log(a) - std::log(b));
}

}  // namespace

CostForm cost_form(std::string_view op, std::string_view algorithm) {
  const bool gather = op == "allgather-padded" || op == "allgather-exact";
  if (op == "allreduce" && algorithm == "bcube") return CostForm::kBcubeAllreduce;
  if (gather && algorithm == "bruck") return CostForm::kBruckAllgather;
  if (algorithm != "ring")
    throw DataError(detail::concat("comm.csv: algorithm '", algorithm, "' of op '", op,
                                   "' is not known; expected ring, or bcube for allreduce, bruck "
                                   "for the all-gathers"));
  if (op == "allreduce") return CostForm::kRingAllreduce;
  if (gather) return CostForm::kRingAllgather;
  if (op == "broadcast") return CostForm::kBinomialBroadcast;
  if (op == "alltoall") return CostForm::kPairwiseAlltoall;
  throw DataError(detail::concat("comm.csv: op '", op,
                                 "' is not known; expected allreduce, allgather-padded, "
                                 "allgather-exact, broadcast or alltoall"));
}

double collective_time(CostForm form, double alpha_s, double beta_s_per_byte, int workers,
                       double bytes_per_rank) {
  const auto [xa, xb] = regressors(form, workers, bytes_per_rank);
  return xa * alpha_s + xb * beta_s_per_byte;
}

namespace {

// One sweep point as the regressors of its form, for the relative least squares.
struct Row {
  double xa, xb, t;
};

// Least squares of t = xa alpha + xb beta on relative residuals (every row divided by t). With
// fixed_beta >= 0 only alpha is fitted. A negative coefficient (noise at one size only) is clamped
// to 0 and the other refitted.
void solve(const std::vector<Row>& rows, double fixed_beta, double& alpha, double& beta) {
  double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
  for (const auto& r : rows) {
    const double xa = r.xa / r.t, xb = r.xb / r.t;
    saa += xa * xa, sab += xa * xb, sbb += xb * xb, sa += xa, sb += xb;
  }
  if (fixed_beta >= 0) {
    beta = fixed_beta;
    alpha = saa > 0 ? std::max(0.0, (sa - beta * sab) / saa) : 0;
    return;
  }
  const double det = saa * sbb - sab * sab;
  const bool ok = std::abs(det) > 1e-12 * saa * sbb;
  alpha = ok ? (sa * sbb - sb * sab) / det : 0;
  beta = ok ? (saa * sb - sab * sa) / det : 0;
  if (!(alpha > 0)) alpha = 0, beta = sbb > 0 ? sb / sbb : 0;
  if (!(beta > 0)) beta = 0, alpha = saa > 0 ? sa / saa : 0;
}

double relative_residual(const Row& r, double alpha, double beta) {
  return (r.xa * alpha + r.xb * beta - r.t) / r.t;
}

double rms_of(const std::vector<Row>& rows, double alpha, double beta) {
  double ss = 0;
  for (const auto& r : rows) ss += std::pow(relative_residual(r, alpha, beta), 2);
  return rows.empty() ? 0 : std::sqrt(ss / static_cast<double>(rows.size()));
}

// Fits, then drops the points more than 3 times the median relative residual off (and over 10 %:
// a sweep point hit by a stall of the shared machine) and fits again on the rest.
void robust_solve(std::vector<Row>& rows, double fixed_beta, double& alpha, double& beta) {
  solve(rows, fixed_beta, alpha, beta);
  if (rows.size() < 6) return;
  std::vector<double> res;
  for (const auto& r : rows) res.push_back(std::abs(relative_residual(r, alpha, beta)));
  auto sorted = res;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double cut = std::max(0.1, 3 * sorted[sorted.size() / 2]);
  std::vector<Row> kept;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (res[i] <= cut) kept.push_back(rows[i]);
  if (kept.size() < rows.size() && kept.size() >= 3) {
    rows = std::move(kept);
    solve(rows, fixed_beta, alpha, beta);
  }
}

// Whether a fit's sizes pin beta: the bandwidth term is at least 30 % of the largest call's time,
// and beta is not faster than the wire.
bool pins_beta(const std::vector<Row>& rows, double beta, double bandwidth_bps) {
  double share = 0;
  for (const auto& r : rows) share = std::max(share, r.xb * beta / r.t);
  return beta > 0 && share >= 0.3 && (8.0 / bandwidth_bps) / beta <= 1.05;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Values gathered per iteration at target density d: k' = (k' / k) k; none for dense.
double gathered_values(std::string_view sparsifier, double sent_ratio, double density, double n_g) {
  return sparsifier == "dense" ? 0.0 : sent_ratio * std::floor(density * n_g);
}

// The values the selection's union handles: the Top-k-like lists are merged pairwise,
// ceil(log2 W) rounds over all G values (sparse_exchange's union_of_sorted_lists); the others'
// lists are disjoint or single, handled once.
double union_values(std::string_view sparsifier, int workers, double g) {
  return is_topk_like(sparsifier) ? g * std::max(1.0, std::ceil(std::log2(workers))) : g;
}

// One label's costs from its cells (see LabelCost).
LabelCost fit_label_cost(const std::string& label, const std::vector<const MeasuredCell*>& cs) {
  LabelCost lc;
  lc.label = label;
  lc.sparsifier = cs.front()->sparsifier;
  std::vector<double> sel_pe, compute;
  std::map<double, std::vector<Row>> sel_by_d;  // (elements, G, seconds)
  std::vector<Row> rest;
  for (const auto* c : cs) {
    const double ng = static_cast<double>(c->n_g);
    // The selection is part of the non-communication time: a select_ms above it (timed in wall
    // time on a shared machine) is capped there, so the two costs add up to the measurement.
    const double sel = std::min(c->select_ms, c->non_comm_ms);
    const double elements = measured_select_elements(c->sparsifier, c->workers, ng);
    const double dr = c->density_ratio > 0 ? c->density_ratio : 1;
    const double g = gathered_values(c->sparsifier, dr, c->density, ng);
    sel_pe.push_back(sel * 1e-3 / elements);
    if (sel > 0)
      sel_by_d[c->density].push_back(
          {elements, union_values(c->sparsifier, c->workers, g), sel * 1e-3});
    const double t = (c->non_comm_ms - sel) * 1e-3;
    if (t > 0) rest.push_back({ng, g, t});
    compute.push_back(c->compute_ms);
  }
  lc.select_s_per_element = median_of(sel_pe);
  for (auto& [d, rows] : sel_by_d) {
    double g_lo = rows.front().xb, g_hi = g_lo;
    for (const auto& r : rows) g_lo = std::min(g_lo, r.xb), g_hi = std::max(g_hi, r.xb);
    SelectCost sc{d, 0, 0};
    // G within 20 % over the W measured (ExDyna's k' ~ k, CLT-k's leader): per element alone.
    robust_solve(rows, g_hi > 1.2 * g_lo ? -1.0 : 0.0, sc.s_per_element, sc.s_per_value);
    lc.select_by_density.push_back(sc);
  }
  // Medians would not see G; a least-squares fit that drops stalled cells (robust_solve) does.
  if (!rest.empty()) robust_solve(rest, -1, lc.rest_s_per_element, lc.rest_s_per_value);
  lc.compute_ms = median_of(compute);
  lc.points = static_cast<int>(cs.size());
  return lc;
}

// One call of op under the ring form, or the log-round form where the engine also ran that for op
// and it is cheaper (the engine's switch picks the faster of the two). f may be another op's
// fit on the same link (borrowed): then the ring form alone.
double cheaper_form(std::string_view op, const LinkFit& f, double alpha, double beta, int workers,
                    double bytes) {
  const double ring = collective_time(cost_form(op), alpha, beta, workers, bytes);
  if (f.log_algorithm.empty() || f.op != op) return ring;
  return std::min(ring,
                  collective_time(cost_form(op, f.log_algorithm), alpha, beta, workers, bytes));
}

}  // namespace

SelectCost LabelCost::select_at(double density) const {
  if (select_by_density.empty()) return {density, select_s_per_element, 0};
  const SelectCost* best = nullptr;
  for (const auto& e : select_by_density)
    if (!best || log_distance(e.density, density) < log_distance(best->density, density)) best = &e;
  return *best;
}

std::vector<LinkFit> fit_links(const std::vector<CommPoint>& points) {
  std::map<std::tuple<std::string, double, double>, std::vector<Row>> groups;
  std::map<std::tuple<std::string, double, double>, std::string> log_algorithm;
  for (const auto& p : points)
    if (p.workers > 1) {
      const auto [xa, xb] = regressors(cost_form(p.op, p.algorithm), p.workers, p.bytes);
      groups[{p.op, p.bandwidth_bps, p.delay_us}].push_back({xa, xb, p.time_s});
      if (p.algorithm != "ring") log_algorithm[{p.op, p.bandwidth_bps, p.delay_us}] = p.algorithm;
    }
  std::vector<LinkFit> out;
  std::vector<std::vector<Row>> kept;
  for (auto& [key, rows] : groups) {
    LinkFit f;
    f.op = std::get<0>(key);
    f.bandwidth_bps = std::get<1>(key);
    f.delay_us = std::get<2>(key);
    f.log_algorithm = log_algorithm[key];
    robust_solve(rows, -1, f.alpha_s, f.beta_s_per_byte);
    f.points = static_cast<int>(rows.size());
    out.push_back(f);
    kept.push_back(rows);
  }
  // beta belongs to the link, not the op: where an op's sweep did not pin it (its sizes too small,
  // or a beta faster than the wire), take the link's beta from an op that did (all-reduce first,
  // it has the largest sizes) and refit alpha alone.
  std::vector<bool> pinned(out.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    pinned[i] = pins_beta(kept[i], out[i].beta_s_per_byte, out[i].bandwidth_bps);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (pinned[i]) continue;
    const LinkFit* donor = nullptr;
    for (std::size_t j = 0; j < out.size(); ++j) {
      const auto& g = out[j];
      if (pinned[j] && g.bandwidth_bps == out[i].bandwidth_bps && g.delay_us == out[i].delay_us &&
          (!donor || g.op == "allreduce"))
        donor = &g;
    }
    if (!donor) continue;
    out[i].beta_from = donor->op;
    robust_solve(kept[i], donor->beta_s_per_byte, out[i].alpha_s, out[i].beta_s_per_byte);
    out[i].points = static_cast<int>(kept[i].size());
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto& f = out[i];
    f.link_efficiency = f.beta_s_per_byte > 0 ? (8.0 / f.bandwidth_bps) / f.beta_s_per_byte : 0;
    f.rel_rms = rms_of(kept[i], f.alpha_s, f.beta_s_per_byte);
  }
  return out;
}

std::vector<LinkFit> fit_alpha_per_workers(const std::vector<CommPoint>& points,
                                           const std::vector<LinkFit>& pooled) {
  std::vector<LinkFit> out;
  for (const auto& f : pooled) {
    std::map<int, std::vector<Row>> by_w, large_by_w;
    for (const auto& p : points)
      if (p.op == f.op && p.bandwidth_bps == f.bandwidth_bps && p.delay_us == f.delay_us &&
          p.workers > 1) {
        const auto [xa, xb] = regressors(cost_form(p.op, p.algorithm), p.workers, p.bytes);
        by_w[p.workers].push_back({xa, xb, p.time_s});
        if (p.bytes >= kLargeMessageBytes) large_by_w[p.workers].push_back({xa, xb, p.time_s});
      }
    for (auto& [w, rows] : by_w) {
      LinkFit g = f;
      g.workers = w;
      auto own = rows;
      robust_solve(own, -1, g.alpha_s, g.beta_s_per_byte);
      if (pins_beta(own, g.beta_s_per_byte, g.bandwidth_bps)) {
        rows = std::move(own);
        g.beta_from = "";
      } else {
        robust_solve(rows, f.beta_s_per_byte, g.alpha_s, g.beta_s_per_byte);
        g.beta_from = f.beta_from.empty() ? f.op + " (all W)" : f.beta_from;
      }
      g.link_efficiency = g.beta_s_per_byte > 0 ? (8.0 / g.bandwidth_bps) / g.beta_s_per_byte : 0;
      g.points = static_cast<int>(rows.size());
      g.rel_rms = rms_of(rows, g.alpha_s, g.beta_s_per_byte);
      out.push_back(g);
      auto& large = large_by_w[w];
      if (large.size() < 3) continue;
      LinkFit h = g;
      h.min_bytes = kLargeMessageBytes;
      h.beta_from = "";
      solve(large, -1, h.alpha_s, h.beta_s_per_byte);
      if (!(h.beta_s_per_byte > 0)) continue;  // the large sizes do not pin a slope: keep g
      h.link_efficiency = (8.0 / h.bandwidth_bps) / h.beta_s_per_byte;
      h.points = static_cast<int>(large.size());
      h.rel_rms = rms_of(large, h.alpha_s, h.beta_s_per_byte);
      out.push_back(h);
    }
  }
  return out;
}

double critical_select_elements(std::string_view sparsifier, int workers, double n_g) {
  return is_exdyna(sparsifier) ? n_g / workers : n_g;
}

double measured_select_elements(std::string_view sparsifier, int workers, double n_g) {
  return critical_select_elements(sparsifier, workers, n_g);
}

ScaleModel ScaleModel::fit(const std::vector<CommPoint>& comm,
                           const std::vector<MeasuredCell>& cells,
                           const std::map<CellKey, CellSeries>& series) {
  ScaleModel m;
  // Stalled sweep points (slower than a larger size) out first, as the cells' interpolation does.
  const auto clean = without_stalls(comm);
  m.links_ = fit_links(clean);
  m.per_w_ = fit_alpha_per_workers(clean, m.links_);
  m.cells_ = cells;
  std::map<std::string, std::vector<const MeasuredCell*>> by_label;
  for (const auto& c : cells) by_label[c.label].push_back(&c);
  for (const auto& [label, cs] : by_label) m.costs_.push_back(fit_label_cost(label, cs));
  // Exchange shapes per (label, W, d): means over bandwidths.
  std::map<std::tuple<std::string, int, double>, std::pair<ExchangeShape, int>> acc;
  for (const auto& c : cells) {
    auto& [s, n] = acc[{c.label, c.workers, c.density}];
    if (n == 0) s = ExchangeShape{0, 0, 0, 0};
    ExchangeShape one;
    one.density_ratio = c.density_ratio > 0 ? c.density_ratio : 1;
    one.f_t = c.f_t >= 1 ? c.f_t : 1;
    one.fused_share = std::isnan(c.fused_share) ? 0 : c.fused_share;
    const auto it = series.find(CellKey{c.label, c.workers, c.bandwidth_bps, c.density});
    if (it != series.end()) {
      double su = 0, sk = 0, sc = 0;
      int nc = 0;
      const auto& sr = it->second;
      for (std::size_t i = 0; i < sr.k_total.size(); ++i) {
        if (sr.k_total[i] > 0 && sr.k_unique[i] > 0) su += sr.k_unique[i], sk += sr.k_total[i];
        if (sr.bytes_allgather_counts[i] > 0) sc += sr.bytes_allgather_counts[i], ++nc;
      }
      if (sk > 0) one.unique_ratio = su / sk;
      if (nc > 0) one.counts_bytes_per_rank = sc / nc / c.workers;
    }
    s.density_ratio += one.density_ratio, s.f_t += one.f_t, s.unique_ratio += one.unique_ratio;
    s.counts_bytes_per_rank += one.counts_bytes_per_rank;
    s.fused_share += one.fused_share;
    ++n;
  }
  for (auto& [key, v] : acc) {
    auto [s, n] = v;
    s.density_ratio /= n, s.f_t /= n, s.unique_ratio /= n, s.counts_bytes_per_rank /= n;
    s.fused_share /= n;
    m.shapes_.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), s});
  }
  return m;
}

std::vector<std::string> ScaleModel::labels() const {
  std::vector<std::string> out;
  for (const auto& c : costs_) out.push_back(c.label);
  return out;
}

const LabelCost& ScaleModel::cost(const std::string& label) const {
  for (const auto& c : costs_)
    if (c.label == label) return c;
  throw Error(detail::concat("scale model: no measured cell of '", label, "'"));
}

const LinkFit& ScaleModel::link(std::string_view op, double bandwidth_bps) const {
  EXDYNA_CHECK(!links_.empty(), "scale model: no collective was fitted (comm.csv has no rows)");
  // The op's own fits first; then the other all-gather; then any op on the link.
  const std::string_view other = op == "allgather-padded"  ? "allgather-exact"
                                 : op == "allgather-exact" ? "allgather-padded"
                                                           : "allreduce";
  for (std::string_view want : {op, other, std::string_view("allreduce"), std::string_view()}) {
    const LinkFit* best = nullptr;
    for (const auto& f : links_) {
      if (!want.empty() && f.op != want) continue;
      if (!best || log_distance(f.bandwidth_bps, bandwidth_bps) <
                       log_distance(best->bandwidth_bps, bandwidth_bps))
        best = &f;
    }
    if (best) return *best;
  }
  return links_.front();
}

double ScaleModel::collective_s(std::string_view op, int workers, double bandwidth_bps,
                                double bytes, Latency latency) const {
  if (workers <= 1) return 0;
  const auto& f = link(op, bandwidth_bps);
  if (latency == Latency::kAtMeasuredWorkers) {
    // This W's fits on this link: the one for the largest size range the call falls in.
    const LinkFit* at_w = nullptr;
    for (const auto& g : per_w_)
      if (g.op == f.op && g.workers == workers && g.bandwidth_bps == bandwidth_bps &&
          g.min_bytes <= bytes && (!at_w || g.min_bytes > at_w->min_bytes))
        at_w = &g;
    if (at_w) return cheaper_form(op, *at_w, at_w->alpha_s, at_w->beta_s_per_byte, workers, bytes);
  }
  // At an unmeasured rate the fitted link efficiency carries over: beta scales with 1 / rate.
  const double beta = f.beta_s_per_byte * f.bandwidth_bps / bandwidth_bps;
  const double alpha = latency == Latency::kStated ? kStatedAlphaS : f.alpha_s;
  return cheaper_form(op, f, alpha, beta, workers, bytes);
}

const ScaleModel::ShapeAt& ScaleModel::shape(const std::string& label, int workers,
                                             double density) const {
  const ShapeAt* best = nullptr;
  for (const auto& s : shapes_) {
    if (s.label != label) continue;
    if (!best) {
      best = &s;
      continue;
    }
    const double dd = log_distance(s.density, density), bd = log_distance(best->density, density);
    const double dw = log_distance(s.workers, workers), bw = log_distance(best->workers, workers);
    if (dd < bd - 1e-9 ||
        (dd <= bd + 1e-9 && (dw < bw - 1e-9 || (dw <= bw + 1e-9 && s.workers > best->workers))))
      best = &s;
  }
  EXDYNA_CHECK(best, "scale model: no measured cell of '", label, "'");
  return *best;
}

Prediction ScaleModel::predict(const std::string& label, int workers, double bandwidth_bps,
                               double density, double n_g, Latency latency) const {
  const auto& lc = cost(label);
  const auto& sp = lc.sparsifier;
  Prediction p;
  p.compute_ms = lc.compute_ms;
  const double g = gathered_values(sp, sent_ratio(label, workers, density), density, n_g);
  const SelectCost sc = lc.select_at(density);
  p.select_ms = 1e3 * (sc.s_per_element * critical_select_elements(sp, workers, n_g) +
                       sc.s_per_value * union_values(sp, workers, g));
  p.non_comm_ms = p.select_ms + 1e3 * (lc.rest_s_per_element * n_g + lc.rest_s_per_value * g);
  const double W = workers;
  const double k = std::floor(density * n_g);
  if (sp == "dense") {
    p.allreduce_ms = 1e3 * collective_s("allreduce", workers, bandwidth_bps, 4 * n_g, latency);
  } else if (sp == "cltk") {
    p.broadcast_ms = 1e3 * collective_s("broadcast", workers, bandwidth_bps, 4 * k, latency);
    p.allreduce_ms = 1e3 * collective_s("allreduce", workers, bandwidth_bps, 4 * k, latency);
  } else if (sp == "randomk") {
    // Every rank draws the same k indices: only the k values travel.
    p.allreduce_ms = 1e3 * collective_s("allreduce", workers, bandwidth_bps, 4 * k, latency);
  } else if (sp == "oktopk") {
    // The sparse reduce-scatter (each worker's ~k records of 8 bytes to the owners: an
    // all-to-all), the balancing (at most the k' kept records, spread over the owners: another)
    // and the balanced all-gather of the k' kept records. Re-evaluation steps (1 in 32, an
    // all-gather of every reduced entry) are left out.
    const auto& s = shape(label, workers, density).s;
    const double kp = sent_ratio(label, workers, density) * k;
    p.allreduce_ms = 1e3 * collective_s("alltoall", workers, bandwidth_bps, 8 * k, latency);
    p.allgather_ms =
        1e3 * (2 * collective_s("allgather-exact", workers, bandwidth_bps, s.counts_bytes_per_rank,
                                latency) +
               collective_s("alltoall", workers, bandwidth_bps, 8 * kp / W, latency) +
               collective_s("allgather-padded", workers, bandwidth_bps, 8 * kp / W, latency));
  } else {
    const auto& near = shape(label, workers, density);
    const auto& s = near.s;
    const double kp = sent_ratio(label, workers, density) * k;
    double f = s.f_t;
    if (!is_topk_like(sp) && near.workers != workers) {
      // Unmeasured W: the exact controller's worker cap at the Poisson floor bounds f(t); the
      // paper's controller has no cap, so keep the worse of its measured f(t) and that floor.
      sparsifiers::ExDynaOptions cap;
      cap.worker_cap = sparsifiers::ExDynaOptions::kAutoCap;
      const double kcap = static_cast<double>(
          cap.max_per_worker(static_cast<std::int64_t>(std::max(kp, 1.0)), workers));
      const double floor_f = kcap * W / std::max(kp, 1.0);
      f = label.find("exact") != std::string::npos ? floor_f : std::max(s.f_t, floor_f);
    }
    const double max_k = f * kp / W;
    const double two =
        collective_s("allgather-exact", workers, bandwidth_bps, s.counts_bytes_per_rank, latency) +
        collective_s("allgather-padded", workers, bandwidth_bps, 4 * max_k, latency);
    double gather = two;
    if (s.fused_share > 0) {
      // The fused all-gather: one slot per rank of the counts' head, the list's length and the
      // cap's indices with their 2-byte places. At a measured W the share of steps the run fused;
      // elsewhere --fuse auto's choice, the cheaper path.
      sparsifiers::ExDynaOptions cap;
      cap.worker_cap = sparsifiers::ExDynaOptions::kAutoCap;
      const double kc =
          static_cast<double>(cap.max_per_worker(static_cast<std::int64_t>(k), workers));
      const double slot = s.counts_bytes_per_rank + 8 + (kc <= 65536 ? 6 : 8) * kc;
      const double fused = collective_s("allgather-exact", workers, bandwidth_bps, slot, latency);
      gather = near.workers == workers ? (1 - s.fused_share) * two + s.fused_share * fused
                                       : std::min(two, fused);
    }
    p.allgather_ms = 1e3 * gather;
    p.allreduce_ms =
        1e3 * collective_s("allreduce", workers, bandwidth_bps, 4 * s.unique_ratio * kp, latency);
  }
  p.comm_ms = p.allgather_ms + p.allreduce_ms + p.broadcast_ms;
  p.iter_ms = p.compute_ms + p.non_comm_ms + p.comm_ms;
  return p;
}

double ScaleModel::sent_ratio(const std::string& label, int workers, double density) const {
  if (cost(label).sparsifier == "dense") return 1;
  const auto& near = shape(label, workers, density);
  // Top-k-like: every worker sends its own ~k, so k' grows with W (the gradient build-up).
  return is_topk_like(cost(label).sparsifier)
             ? near.s.density_ratio / near.workers * static_cast<double>(workers)
             : near.s.density_ratio;
}

std::string ScaleModel::model_csv() const {
  std::ostringstream os;
  os << "label,workers,bandwidth_bps,density,n_g,pred_iter_ms,pred_select_ms,pred_comm_ms,"
        "stated_alpha_us,stated_iter_ms,stated_comm_ms\n";
  std::set<std::tuple<std::string, double, std::int64_t>> settings;
  for (const auto& c : cells_) settings.insert({c.label, c.density, c.n_g});
  for (const auto& [label, d, ng] : settings)
    for (const double b : {1e9, 1e10, 1e11})
      for (int w = 2; w <= 256; w *= 2) {
        const auto p = predict(label, w, b, d, static_cast<double>(ng));
        const auto q = predict(label, w, b, d, static_cast<double>(ng), Latency::kStated);
        os << label << ',' << w << ',' << num_text(b) << ',' << num_text(d) << ',' << ng << ','
           << num_text(p.iter_ms) << ',' << num_text(p.select_ms) << ',' << num_text(p.comm_ms)
           << ',' << num_text(kStatedAlphaS * 1e6) << ',' << num_text(q.iter_ms) << ','
           << num_text(q.comm_ms) << '\n';
      }
  return os.str();
}

std::string ScaleModel::fit_csv() const {
  std::ostringstream os;
  os << "kind,name,workers,bandwidth_bps,delay_us,alpha_s,beta_s_per_byte,link_efficiency,"
        "select_s_per_element,rest_s_per_element,compute_ms,points,rel_rms,beta_from,"
        "rest_s_per_value,min_bytes,log_algorithm\n";
  std::vector<LinkFit> all = links_;
  all.insert(all.end(), per_w_.begin(), per_w_.end());
  for (const auto& f : all)
    os << "collective," << f.op << ',' << (f.workers ? std::to_string(f.workers) : "all") << ','
       << num_text(f.bandwidth_bps) << ',' << num_text(f.delay_us) << ',' << num_text(f.alpha_s)
       << ',' << num_text(f.beta_s_per_byte) << ',' << num_text(f.link_efficiency) << ",,,,"
       << f.points << ',' << num_text(f.rel_rms) << ',' << f.beta_from << ",,"
       << num_text(f.min_bytes) << ',' << f.log_algorithm << '\n';
  for (const auto& c : costs_)
    os << "label," << c.label << ",,,,,,," << num_text(c.select_s_per_element) << ','
       << num_text(c.rest_s_per_element) << ',' << num_text(c.compute_ms) << ',' << c.points
       << ",,," << num_text(c.rest_s_per_value) << ",,\n";
  return os.str();
}

std::vector<ModelError> model_errors(const ScaleModel& model,
                                     const std::vector<MeasuredCell>& cells, Latency latency) {
  std::vector<ModelError> out;
  for (const auto& c : cells) {
    ModelError e;
    e.cell = c;
    e.pred = model.predict(c.label, c.workers, c.bandwidth_bps, c.density,
                           static_cast<double>(c.n_g), latency);
    e.rel_error = c.iter_ms > 0 ? (e.pred.iter_ms - c.iter_ms) / c.iter_ms
                                : std::numeric_limits<double>::quiet_NaN();
    out.push_back(e);
  }
  return out;
}

}  // namespace exdyna::eval
