#include "exdyna/eval/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "exdyna/core/atomic_file.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/eval/measurements.hpp"
#include "exdyna/eval/report_efficiency.hpp"
#include "exdyna/eval/report_figures.hpp"
#include "exdyna/eval/scale_model.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

using SettingKey = std::tuple<int, double, double, std::int64_t>;  // W, B, d, n_g

SettingKey key_of(const MeasuredCell& c) {
  return {c.workers, c.bandwidth_bps, c.density, c.n_g};
}

std::string setting_cells(const SettingKey& k) {
  return std::to_string(std::get<0>(k)) + " | " + rate_text(std::get<1>(k)) + " | " +
         num_text(std::get<2>(k)) + " | " + std::to_string(std::get<3>(k));
}

// Where exdyna-exact loses against the fastest: the phase with the largest excess.
std::string why_slower(const MeasuredCell& ex, const MeasuredCell& best) {
  const std::pair<const char*, double> d[] = {
      {"communication", ex.comm_ms - best.comm_ms},
      {"selection", ex.select_ms - best.select_ms},
      {"other non-communication phases",
       (ex.non_comm_ms - ex.select_ms) - (best.non_comm_ms - best.select_ms)},
      {"compute", ex.compute_ms - best.compute_ms}};
  const auto* worst = &d[0];
  for (const auto& x : d)
    if (x.second > worst->second) worst = &x;
  std::ostringstream os;
  os << "it spends " << fmt("%.3g", worst->second) << " ms more on " << worst->first
     << " (communication " << fmt("%.3g", ex.comm_ms) << " vs " << fmt("%.3g", best.comm_ms)
     << " ms, selection " << fmt("%.3g", ex.select_ms) << " vs " << fmt("%.3g", best.select_ms)
     << " ms; f(t) " << fmt("%.3g", ex.f_t) << ", density ratio " << fmt("%.3g", ex.density_ratio)
     << ")";
  return os.str();
}

std::string summary_md(const std::vector<MeasuredCell>& cells) {
  std::map<SettingKey, std::vector<const MeasuredCell*>> by;
  for (const auto& c : cells) by[key_of(c)].push_back(&c);
  std::ostringstream os, notes;
  os << "| W | bandwidth | d | n_g | fastest | iteration (ms) | runner-up (x slower) | dense (x "
        "slower) | exdyna-exact (x slower) |\n|---|---|---|---|---|---|---|---|---|\n";
  int ex_settings = 0, ex_wins = 0;
  for (auto& [k, v] : by) {
    std::sort(v.begin(), v.end(),
              [](const auto* a, const auto* b) { return a->iter_ms < b->iter_ms; });
    const auto& best = *v.front();
    auto ratio_of = [&](const MeasuredCell* c) {
      return c ? c->label + " (" + fmt("%.2f", c->iter_ms / best.iter_ms) + "x)" : std::string("—");
    };
    const MeasuredCell *dense = nullptr, *ex = nullptr;
    for (const auto* c : v) {
      if (c->sparsifier == "dense") dense = c;
      if (c->label == "exdyna-exact") ex = c;
    }
    os << "| " << setting_cells(k) << " | **" << best.label << "** | " << fmt("%.3f", best.iter_ms)
       << " | " << (v.size() > 1 ? ratio_of(v[1]) : "—") << " | "
       << (dense ? fmt("%.2fx", dense->iter_ms / best.iter_ms) : "not run") << " | "
       << (ex ? fmt("%.2fx", ex->iter_ms / best.iter_ms) : "not run") << " |\n";
    if (ex) {
      ++ex_settings;
      if (ex == &best)
        ++ex_wins;
      else
        notes << "- " << std::get<0>(k) << " workers, " << rate_text(std::get<1>(k))
              << ", d = " << num_text(std::get<2>(k)) << ": **exdyna-exact is not the fastest**; "
              << best.label << " is, " << fmt("%.2f", ex->iter_ms / best.iter_ms) << "x faster"
              << (ex->iter_ms < 1.05 * best.iter_ms
                      ? " (within 5 %, about the noise of one measurement)"
                      : "")
              << "; " << why_slower(*ex, best) << ".\n";
    }
  }
  std::ostringstream out;
  out << "exdyna-exact is the fastest in " << ex_wins << " of the " << ex_settings
      << " settings where it ran (of " << by.size() << " settings measured).\n\n"
      << os.str() << '\n'
      << notes.str();
  return out.str();
}

// Collective calls per iteration of each label, over its cells: at small messages each call is
// one latency-bound round or more, which is what a sparse step at low density pays for. Empty
// when cells.csv predates the column.
std::string collectives_md(const std::vector<MeasuredCell>& cells) {
  std::map<std::string, std::vector<double>> by, fused;
  for (const auto& c : cells) {
    if (std::isnan(c.collectives_per_iter)) continue;
    by[c.label].push_back(c.collectives_per_iter);
    if (!std::isnan(c.fused_share)) fused[c.label].push_back(c.fused_share);
  }
  if (by.empty()) return "";
  std::vector<std::string> labels;
  for (const auto& [l, v] : by) labels.push_back(l);
  const auto range = [](const std::vector<double>& v) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return *hi - *lo < 0.005 ? fmt("%.2f", *lo) : fmt("%.2f", *lo) + " - " + fmt("%.2f", *hi);
  };
  std::ostringstream os;
  os << "Collective calls per iteration (the mean over measured iterations; each call is one "
        "latency-bound round or more), and the share of iterations whose counts and indices "
        "travelled in one all-gather (ExDyna's `--fuse`):\n\n"
        "| label | calls per iteration | fused share | cells |\n|---|---|---|---|\n";
  for (const auto& l : ordered_labels(labels)) {
    const auto f = fused.find(l);
    const bool any = f != fused.end() && *std::max_element(f->second.begin(), f->second.end()) > 0;
    os << "| " << l << " | " << range(by.at(l)) << " | " << (any ? range(f->second) : "-") << " | "
       << by.at(l).size() << " |\n";
  }
  return os.str() + "\n";
}

std::string completeness_md(const std::vector<MeasuredCell>& cells) {
  std::set<std::string> labels;
  std::set<SettingKey> settings;
  std::set<std::pair<std::string, SettingKey>> have;
  for (const auto& c : cells) {
    labels.insert(c.label);
    settings.insert(key_of(c));
    have.insert({c.label, key_of(c)});
  }
  std::vector<std::string> missing;
  for (const auto& l : labels)
    for (const auto& s : settings)
      if (!have.count({l, s}))
        missing.push_back(l + " at " + std::to_string(std::get<0>(s)) + " workers, " +
                          rate_text(std::get<1>(s)) + ", d = " + num_text(std::get<2>(s)));
  std::ostringstream os;
  os << cells.size() << " cells measured: " << labels.size() << " labels x " << settings.size()
     << " settings";
  if (missing.empty()) return os.str() + " (complete).\n";
  os << "; **the matrix is partial**, " << missing.size() << " cells missing:";
  for (std::size_t i = 0; i < missing.size() && i < 20; ++i) os << (i ? "; " : " ") << missing[i];
  if (missing.size() > 20) os << "; ...";
  return os.str() + ".\n";
}

const char* kMethod =
    "A *cell* is one (sparsifier label, workers W, link rate B, density d). For each network "
    "setting (W, B) the comparison creates W emulated hosts (network namespaces on a bridge, each "
    "host's link shaped with `tc` to B, with a delay where `sch_netem` is available) and runs, "
    "inside them:\n\n"
    "1. a collective sweep (`exdyna bench comm --backend gloo`: all-reduce, padded and exact "
    "all-gather, broadcast, all-to-all over a range of per-rank sizes; per size the median of the "
    "timed calls, more of them below 1 MiB) -> `comm.csv`;\n"
    "2. every cell: W `exdyna simulate --backend gloo` ranks (a synthetic gradient of n_g "
    "elements, or a trace), every rank's per-iteration statistics kept under `cells/`.\n\n"
    "W ranks share the machine's cores, so wall times of the compute-bound phases are inflated "
    "by core sharing. A cell's non-communication time is therefore, per iteration, the CPU time "
    "of the slowest rank's step (for CLT-k the leader) less the CPU time it spent inside "
    "collectives, its selection time that rank's CPU time in the select phases, the median "
    "over the measured iterations (after a warm-up: 2 iterations, W + 1 where roles rotate); "
    "its communication time is, for each "
    "collective the step made, the time the sweep measured for that operation and size on the "
    "same shaped links (the median of 5 calls per size, more below 1 MiB, interpolated between "
    "sizes; a size slower than a larger one was stalled and is interpolated over, here and in "
    "the scale model's fits); the cells' "
    "own collective wall times are kept "
    "in `cell.json`. Iteration time = compute + non-communication + communication; the compute "
    "part is given (`--compute-ms`), the same for every label.\n";

const char* kModelMethod =
    "Collectives, W ranks, m bytes per rank: ring all-reduce 2(W-1)a + 2(W-1)/W m b; ring "
    "all-gather (W-1)a + (W-1) m b; broadcast, as Gloo implements it (`gloo::broadcast`, a "
    "binomial "
    "tree that forwards the whole message in each round), ceil(log2 W)(a + m b); below the Gloo "
    "engine's algorithm switch (measured when each job starts), bcube all-reduce 2 ceil(log2 W) "
    "a + 2(W-1)/W m b and Bruck all-gather ceil(log2 W) a + (W-1) m b. a and b are "
    "fitted per (op, link rate) by least squares on relative residuals, each sweep point under "
    "the form of the algorithm that ran it (comm.csv's algorithm column); a prediction takes the "
    "cheaper form, as the switch does. At a rate that was not "
    "measured (100 Gbit/s), b is the nearest measured rate's b scaled by the rate ratio, i.e. the "
    "fitted link efficiency (wire time per byte / b) is assumed to carry over, and a is kept. "
    "The fitted a is mostly W processes waiting for the machine's shared cores; model.csv's "
    "stated_* columns and the scale figures replace it by a stated per-message latency "
    "(stated_alpha_us: one small TCP message between two machines of a datacenter network) for "
    "W the machine cannot host.\n\n"
    "Iteration = compute + selection + other non-communication + communication, with: selection "
    "= per-element cost x n_g/W for ExDyna (its partition), x n_g for the others (CLT-k's leader "
    "selects over n_g while the others wait), + a cost per value x G ceil(log2 W) for the "
    "Top-k-like labels, whose selection also merges the W gathered lists pairwise into their "
    "union (x G for the others), both fitted over the label's cells at the density nearest to d "
    "(the per-value term only where G moves with W); accumulate/update/other = a x n_g + b x G, "
    "G = k' the "
    "values gathered per iteration (the update's scatter and the union grow with it), a and b "
    "fitted per label over its cells by least squares on relative residuals. Dense: all-reduce of "
    "4 n_g bytes. "
    "Sparse: all-gather of the counts (exact), padded all-gather of 4 max k_i bytes per rank, "
    "all-reduce "
    "of 4 k_u values, with max k_i = f(t) k'/W; Top-k-like labels (topk, hard-threshold, sidco) "
    "send their measured per-worker share each, so k' grows as W k (gradient build-up), "
    "ExDyna's k' = (measured k'/k) k; f(t) and k_u/k' (the union's overlap) are the measured "
    "ones at the nearest measured W; for W beyond the measured ones, exdyna-exact's f(t) is its "
    "worker cap, the Poisson floor 1 + sqrt(2 ln W / (k/W)), and exdyna-paper's the larger of "
    "its measured f(t) and that floor. CLT-k: broadcast of the leader's 4k bytes of indices + "
    "all-reduce of k values.\n";

std::string model_md(const ScaleModel& model) {
  std::ostringstream os;
  os << kModelMethod << "\nFitted collectives (`model_fit.csv`):\n\n"
     << "| op | link | delay (us) | alpha (us) | 1/beta (MB/s) | link efficiency | beta from | "
        "points | rel. RMS |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& f : model.links())
    os << "| " << f.op << (f.log_algorithm.empty() ? "" : " (ring + " + f.log_algorithm + ")")
       << " | " << rate_text(f.bandwidth_bps) << " | " << num_text(f.delay_us) << " | "
       << fmt("%.1f", f.alpha_s * 1e6) << " | "
       << (f.beta_s_per_byte > 0 ? fmt("%.1f", 1e-6 / f.beta_s_per_byte) : "—") << " | "
       << fmt("%.2f", f.link_efficiency) << " | "
       << (f.beta_from.empty() ? std::string("own sweep") : f.beta_from) << " | " << f.points
       << " | " << fmt("%.1f %%", 100 * f.rel_rms) << " |\n";
  os << "\nNon-communication costs per label:\n\n| label | selection at each d: ns/element + "
        "ns/gathered value | "
        "other: a (ns/element) | other: b (ns/gathered value) | compute (ms) | cells "
        "|\n|---|---|---|---|---|---|\n";
  for (const auto& l : ordered_labels(model.labels()))
    for (const auto& c : model.costs())
      if (c.label == l) {
        std::string sel;
        for (const auto& s : c.select_by_density)
          sel += (sel.empty() ? "" : ", ") + num_text(s.density) + ": " +
                 fmt("%.3f", s.s_per_element * 1e9) + " + " + fmt("%.2f", s.s_per_value * 1e9);
        os << "| " << l << " | " << sel << " | " << fmt("%.3f", c.rest_s_per_element * 1e9) << " | "
           << fmt("%.2f", c.rest_s_per_value * 1e9) << " | " << fmt("%.3g", c.compute_ms) << " | "
           << c.points << " |\n";
      }
  return os.str() + "\n";
}

std::string alpha_per_workers_md(const ScaleModel& model) {
  if (model.alpha_per_workers().empty()) return "";
  std::ostringstream os;
  os << "alpha and beta fitted at each measured W alone (the pooled beta kept where that W's "
        "sizes do not pin it): where W ranks share fewer cores, a call's latency grows with W "
        "beyond (W-1) alpha, and its time per byte too (the cores, not the link, limit the "
        "rate).\n\n| op | link | W | alpha (us) | 1/beta (MB/s) | beta from | points | rel. RMS "
        "|\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& f : model.alpha_per_workers())
    os << "| " << f.op << (f.min_bytes > 0 ? " (from " + num_text(f.min_bytes) + " B)" : "")
       << " | " << rate_text(f.bandwidth_bps) << " | " << f.workers << " | "
       << fmt("%.1f", f.alpha_s * 1e6) << " | "
       << (f.beta_s_per_byte > 0 ? fmt("%.1f", 1e-6 / f.beta_s_per_byte) : "—") << " | "
       << (f.beta_from.empty() ? std::string("own sweep at W") : f.beta_from) << " | " << f.points
       << " | " << fmt("%.1f %%", 100 * f.rel_rms) << " |\n";
  return os.str() + "\n";
}

// pooled: the model's predictions; at_w: the same with alpha and beta fitted at the cell's W.
std::string errors_md(const std::vector<ModelError>& pooled, const std::vector<ModelError>& at_w) {
  auto count = [](const std::vector<ModelError>& es, double& worst) {
    int within = 0;
    worst = 0;
    for (const auto& e : es) {
      if (std::abs(e.rel_error) <= 0.2) ++within;
      worst = std::max(worst, std::abs(e.rel_error));
    }
    return within;
  };
  double wp = 0, ww = 0;
  const int inp = count(pooled, wp), inw = count(at_w, ww);
  std::ostringstream os;
  os << "**Predicted against measured iteration time (the target: within +-20 %): " << inp << " of "
     << pooled.size() << " cells with the link's fit over every W (largest error "
     << fmt("%.1f %%", 100 * wp) << "); " << inw << " of " << at_w.size()
     << " with alpha and beta fitted at the cell's W (largest error " << fmt("%.1f %%", 100 * ww)
     << ").**\n\n| label | W | link | d | measured (ms) | model (ms) | error | model, fit at W "
        "(ms) | error | within +-20 % | comm: measured / model at W (ms) | non-comm: measured / "
        "model (ms) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < pooled.size() && i < at_w.size(); ++i) {
    const auto& e = pooled[i];
    const auto& f = at_w[i];
    const bool ok = std::abs(e.rel_error) <= 0.2, ok_w = std::abs(f.rel_error) <= 0.2;
    os << "| " << e.cell.label << " | " << e.cell.workers << " | "
       << rate_text(e.cell.bandwidth_bps) << " | " << num_text(e.cell.density) << " | "
       << fmt("%.3f", e.cell.iter_ms) << " | " << fmt("%.3f", e.pred.iter_ms) << " | "
       << fmt("%+.1f %%", 100 * e.rel_error) << " | " << fmt("%.3f", f.pred.iter_ms) << " | "
       << fmt("%+.1f %%", 100 * f.rel_error) << " | "
       << (ok && ok_w ? "yes"
           : ok       ? "model only"
           : ok_w     ? "fit at W only"
                      : "**no**")
       << " | " << fmt("%.3f", e.cell.comm_ms) << " / " << fmt("%.3f", f.pred.comm_ms) << " | "
       << fmt("%.3f", e.cell.non_comm_ms) << " / " << fmt("%.3f", f.pred.non_comm_ms) << " |\n";
  }
  return os.str() + "\n";
}

// The series of the cells at the setting, from each cell's stats.csv; unreadable ones are noted.
SeriesByLabel series_at(const std::map<CellKey, CellSeries>& all, const Setting& s) {
  SeriesByLabel out;
  for (const auto& [k, v] : all)
    if (k.workers == s.workers && std::abs(k.bandwidth_bps - s.bandwidth_bps) < 1 &&
        std::abs(k.density - s.density) <= 1e-12)
      out[k.label] = v;
  return out;
}

}  // namespace

ReportResult write_report(const fs::path& out_dir, const ReportOptions& opts) {
  ReportResult res;
  const auto cells_path = out_dir / "cells.csv";
  EXDYNA_CHECK_T(DataError, fs::exists(cells_path), cells_path.string(),
                 ": not found; run `exdyna compare` first (the report needs at least one cell)");
  const auto cells = read_cells(cells_path);
  EXDYNA_CHECK_T(DataError, !cells.empty(), cells_path.string(), ": no cells (header only)");
  const std::string regen = opts.regenerate_command.empty()
                                ? "exdyna compare --report-only --out " + out_dir.string()
                                : opts.regenerate_command;
  std::map<CellKey, CellSeries> series;
  for (const auto& [k, dir] : find_cell_dirs(out_dir)) {
    if (!fs::exists(dir / "stats.csv")) continue;
    try {
      series[k] = read_stats(dir / "stats.csv");
    } catch (const Error& e) {
      res.notes.push_back(std::string("skipped: ") + e.what());
    }
  }
  std::optional<ScaleModel> model;
  std::vector<ModelError> errors, errors_at_w;
  const auto comm_path = out_dir / "comm.csv";
  if (fs::exists(comm_path)) {
    model = ScaleModel::fit(read_comm(comm_path), cells, series);
    if (!model->links().empty()) {
      core::write_file_atomic(out_dir / "model.csv", model->model_csv());
      core::write_file_atomic(out_dir / "model_fit.csv", model->fit_csv());
      errors = model_errors(*model, cells);
      errors_at_w = model_errors(*model, cells, Latency::kAtMeasuredWorkers);
    } else {
      model.reset();
    }
  }
  if (!model) res.notes.push_back("no scale model: comm.csv is missing or has no rows");

  const Setting head = headline_setting(cells);
  const auto at_head = series_at(series, head);
  std::ostringstream md;
  md << "# exdyna compare: report\n\n";
  if (!opts.command_line.empty()) md << "Run: `" << opts.command_line << "`  \n";
  md << "Regenerate this report and its figures from the files: `" << regen << "`\n\n";
  md << "## Summary\n\nComputed from `cells.csv`. " << completeness_md(cells) << '\n'
     << summary_md(cells) << '\n';
  md << "## Method\n\n" << kMethod << '\n';
  md << "## Iteration time\n\n" << collectives_md(cells);
  std::set<double> rates;
  for (const auto& c : cells) rates.insert(c.bandwidth_bps);
  for (double b : rates)
    md << figure_md(out_dir, breakdown_figure(cells, head, b), opts.gnuplot, regen, res.figures,
                    res.notes);
  md << "## Selection time against workers (the scalability claim)\n\n"
     << figure_md(out_dir, select_figure(cells, model ? &*model : nullptr, head), opts.gnuplot,
                  regen, res.figures, res.notes);
  md << "## Sparsification behaviour at " << setting_text(head) << "\n\n";
  if (at_head.empty()) {
    md << "*No cell at this setting has a `stats.csv`; the per-iteration figures are left "
          "out.*\n\n";
    res.notes.push_back("no stats.csv at the headline setting: per-iteration figures left out");
  } else {
    md << figure_md(out_dir, density_figure(at_head, head), opts.gnuplot, regen, res.figures,
                    res.notes)
       << figure_md(out_dir, f_t_figure(at_head, head), opts.gnuplot, regen, res.figures,
                    res.notes);
    const auto thr = threshold_figure(at_head, head);
    md << (thr.name.empty() ? "*No label at this setting reports a threshold and a global error; "
                              "the threshold figure is left out.*\n\n"
                            : figure_md(out_dir, thr, opts.gnuplot, regen, res.figures, res.notes));
  }
  md << "## Scale model\n\n";
  if (model) {
    md << model_md(*model) << alpha_per_workers_md(*model) << errors_md(errors, errors_at_w)
       << figure_md(out_dir, predicted_vs_measured_figure(errors, errors_at_w), opts.gnuplot, regen,
                    res.figures, res.notes);
    for (double b : {1e9, 1e10, 1e11})
      md << figure_md(out_dir, model_curves_figure(cells, *model, head, b), opts.gnuplot, regen,
                      res.figures, res.notes);
  } else {
    md << "*Not fitted: `comm.csv` is missing or empty, so no collective could be fitted.*\n\n";
  }
  md << "## Statistical efficiency and time to accuracy\n\n"
     << efficiency_section(out_dir, cells, opts, regen, res.figures, res.notes);
  md << "## Files\n\n`cells.csv` (one row per cell), `comm.csv` (collective sweep), `cells/*/` "
        "(per-cell stats.csv, decisions.csv, cell.json), `model.csv` and `model_fit.csv` (scale "
        "model), `efficiency.csv` (training runs), `fig-*.png` with the `fig-*.csv` and "
        "`fig-*.gp` behind each.\n";
  res.report = out_dir / "report.md";
  core::write_file_atomic(res.report, md.str());
  return res;
}

}  // namespace exdyna::eval
