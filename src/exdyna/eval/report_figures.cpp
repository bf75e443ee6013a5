#include "exdyna/eval/report_figures.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <tuple>

#include "exdyna/core/atomic_file.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sim/shell.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;

namespace {

bool same(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), 1.0);
}

std::string cell_or_nan(double v) {
  return std::isfinite(v) ? num_text(v) : "nan";
}

// gnuplot's word list of labels for `for [l in "..."]`.
std::string words(const std::vector<std::string>& labels) {
  std::string w;
  for (const auto& l : labels) {
    if (!w.empty()) w += ' ';
    w += l;
  }
  return w;
}

// A wide per-iteration CSV: iter, then one column per label of value(series, i).
template <typename F>
std::string per_iteration_csv(const SeriesByLabel& series, const std::vector<std::string>& labels,
                              F value) {
  std::size_t rows = 0;
  for (const auto& l : labels) rows = std::max(rows, series.at(l).iter.size());
  std::ostringstream os;
  os << "iter";
  for (const auto& l : labels) os << ',' << l;
  os << '\n';
  for (std::size_t i = 0; i < rows; ++i) {
    double it = static_cast<double>(i);
    for (const auto& l : labels)
      if (i < series.at(l).iter.size()) it = series.at(l).iter[i];
    os << num_text(it);
    for (const auto& l : labels) {
      const auto& s = series.at(l);
      os << ',' << (i < s.iter.size() ? cell_or_nan(value(s, i)) : std::string("nan"));
    }
    os << '\n';
  }
  return os.str();
}

std::vector<std::string> sparse_labels(const SeriesByLabel& series) {
  std::vector<std::string> out;
  for (const auto& [l, s] : series)
    if (l != "dense") out.push_back(l);
  return ordered_labels(out);
}

std::string lines_of_columns(std::size_t n) {
  return "plot for [i=2:" + std::to_string(n + 1) +
         "] 'DATA' using 1:i with lines lw 2 title columnheader(i)";
}

}  // namespace

std::vector<std::string> ordered_labels(std::vector<std::string> labels) {
  static const std::vector<std::string> order = {
      "dense",   "topk", "cltk",   "hard-threshold", "sidco",       "gaussiank",
      "randomk", "dgc",  "oktopk", "exdyna-paper",   "exdyna-exact"};
  auto rank = [&](const std::string& l) {
    const auto it = std::find(order.begin(), order.end(), l);
    return it == order.end() ? order.size() : static_cast<std::size_t>(it - order.begin());
  };
  std::sort(labels.begin(), labels.end(), [&](const std::string& a, const std::string& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
  });
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  return labels;
}

Setting headline_setting(const std::vector<MeasuredCell>& cells) {
  // A measured cell, so that a partial matrix still has data there: the largest W first, then the
  // slowest link, the smallest d, the largest n_g.
  Setting s;
  auto better = [](const MeasuredCell& c, const Setting& b) {
    return std::make_tuple(-c.workers, c.bandwidth_bps, c.density, -c.n_g) <
           std::make_tuple(-b.workers, b.bandwidth_bps, b.density, -b.n_g);
  };
  for (const auto& c : cells)
    if (s.workers == 0 || better(c, s)) s = {c.workers, c.bandwidth_bps, c.density, c.n_g};
  return s;
}

std::string setting_text(const Setting& s) {
  std::ostringstream os;
  os << s.workers << " workers, " << rate_text(s.bandwidth_bps) << ", d = " << num_text(s.density)
     << ", n_g = " << s.n_g;
  return os.str();
}

Figure density_figure(const SeriesByLabel& series, const Setting& s) {
  const auto labels = sparse_labels(series);
  Figure f;
  f.name = "density";
  f.title = "Actual density / target density against iteration (" + setting_text(s) + ")";
  f.caption =
      "Actual density d' = k'/n_g over the target d, per iteration, from each cell's stats.csv "
      "(rank 0). Top-k-like sparsifiers send up to W k values (gradient build-up); the "
      "threshold-based ones follow their threshold.";
  f.csv = per_iteration_csv(series, labels, [](const CellSeries& c, std::size_t i) {
    const double t = c.target_density[i];
    return t > 0 ? c.density[i] / t : std::nan("");
  });
  f.plot =
      "set xlabel 'iteration'; set ylabel 'actual density / target'; set logscale y; "
      "set offsets 0, 0, graph 0.05, graph 0.05;\n" +
      lines_of_columns(labels.size());
  return f;
}

Figure f_t_figure(const SeriesByLabel& series, const Setting& s) {
  const auto labels = sparse_labels(series);
  Figure f;
  f.name = "f_t";
  f.title = "f(t) = W max k_i / k' against iteration (" + setting_text(s) + ")";
  f.caption =
      "The padded all-gather's overhead f(t) (paper Eq. 5): the index all-gather moves f(t) times "
      "the values actually selected. 1 is perfect balance.";
  f.csv = per_iteration_csv(series, labels,
                            [](const CellSeries& c, std::size_t i) { return c.f_t[i]; });
  // Offsets keep lines at the data's extremes (f(t) = 1) off the border.
  f.plot =
      "set xlabel 'iteration'; set ylabel 'f(t)'; set offsets 0, 0, graph 0.05, graph 0.05;\n" +
      lines_of_columns(labels.size());
  return f;
}

Figure threshold_figure(const SeriesByLabel& series, const Setting& s) {
  std::vector<std::string> labels;
  std::map<std::string, double> scale;
  for (const auto& l : sparse_labels(series)) {
    const auto& c = series.at(l);
    double st = 0, se = 0;
    for (std::size_t i = 0; i < c.iter.size(); ++i)
      if (std::isfinite(c.threshold[i]) && std::isfinite(c.global_error[i]))
        st += c.threshold[i], se += c.global_error[i];
    if (st > 0 && se > 0) labels.push_back(l), scale[l] = st / se;
  }
  Figure f;
  if (labels.empty()) return f;
  f.name = "threshold";
  f.title = "Threshold and scaled global error against iteration (" + setting_text(s) + ")";
  f.caption =
      "Solid: the threshold; dashed: the global error ||e_t|| scaled by sum(threshold) / "
      "sum(global error) over the run (the paper's Fig. 10 scaling), per label. A threshold that "
      "traces the global error keeps the density on target.";
  std::vector<std::string> cols;
  std::size_t rows = 0;
  for (const auto& l : labels) rows = std::max(rows, series.at(l).iter.size());
  std::ostringstream os;
  os << "iter";
  for (const auto& l : labels) os << ",threshold " << l << ",scaled error " << l;
  os << '\n';
  for (std::size_t i = 0; i < rows; ++i) {
    os << i;
    for (const auto& l : labels) {
      const auto& c = series.at(l);
      const bool in = i < c.iter.size();
      os << ',' << (in ? cell_or_nan(c.threshold[i]) : "nan") << ','
         << (in ? cell_or_nan(c.global_error[i] * scale[l]) : "nan");
    }
    os << '\n';
  }
  f.csv = os.str();
  const auto n = std::to_string(labels.size());
  f.plot =
      "set xlabel 'iteration'; set ylabel 'threshold (|value|)'; set logscale y;\n"
      "plot for [i=1:" +
      n +
      "] 'DATA' using 1:(column(2*i)) with lines lw 2 lc i title "
      "columnheader(2*i), for [i=1:" +
      n +
      "] 'DATA' using 1:(column(2*i+1)) with lines lw "
      "1 dt 2 lc i title columnheader(2*i+1)";
  return f;
}

Figure select_figure(const std::vector<MeasuredCell>& cells, const ScaleModel* model,
                     const Setting& s) {
  // Every label measured at the setting's bandwidth, density and n_g, over all W.
  std::set<int> ws;
  std::vector<std::string> labels;
  std::map<std::pair<std::string, int>, double> meas;
  for (const auto& c : cells)
    if (same(c.bandwidth_bps, s.bandwidth_bps) && same(c.density, s.density) && c.n_g == s.n_g &&
        c.sparsifier != "dense") {
      labels.push_back(c.label);
      ws.insert(c.workers);
      meas[{c.label, c.workers}] = c.select_ms;
    }
  labels = ordered_labels(labels);
  if (model)
    for (int w = 2; w <= 256; w *= 2) ws.insert(w);
  Figure f;
  f.name = "select";
  f.title = "Selection time per iteration against the number of workers (" +
            rate_text(s.bandwidth_bps) + ", d = " + num_text(s.density) + ")";
  f.caption =
      "Points: measured select CPU time on the critical path (per iteration the slowest rank's; "
      "for CLT-k the leader's). Lines: the scale model (per-element cost x n_g/W for ExDyna, "
      "x n_g for the others, + for the Top-k-like labels the union of the gathered lists, "
      "G log2 W values). ExDyna's selection shrinks as workers are added; the others' stays or "
      "grows.";
  std::ostringstream os;
  os << "workers";
  for (const auto& l : labels) os << ",measured " << l;
  for (const auto& l : labels) os << ",model " << l;
  os << '\n';
  for (int w : ws) {
    os << w;
    for (const auto& l : labels) {
      const auto it = meas.find({l, w});
      os << ',' << (it == meas.end() ? "nan" : num_text(it->second));
    }
    for (const auto& l : labels)
      os << ','
         << (model
                 ? num_text(
                       model->predict(l, w, s.bandwidth_bps, s.density, static_cast<double>(s.n_g))
                           .select_ms)
                 : std::string("nan"));
    os << '\n';
  }
  f.csv = os.str();
  const auto n = std::to_string(labels.size());
  f.plot =
      "set xlabel 'workers W'; set ylabel 'selection time per iteration (ms)'; set logscale "
      "x 2; set logscale y 10; set format y '%g'; set xtics 2; set xrange [1.6:320];\n"
      "plot for [i=1:" +
      n +
      "] 'DATA' using 1:(column(1+i)) with points pt (2*i+3) ps 1.4 lc i "
      "title columnheader(1+i), for [i=1:" +
      n + "] 'DATA' using 1:(column(1+" + n +
      "+i)) with lines lw 1.5 dt 2 lc i title columnheader(1+" + n + "+i)";
  return f;
}

Figure breakdown_figure(const std::vector<MeasuredCell>& cells, const Setting& s,
                        double bandwidth_bps) {
  std::vector<std::string> labels;
  std::map<std::string, const MeasuredCell*> at;
  for (const auto& c : cells)
    if (c.workers == s.workers && same(c.bandwidth_bps, bandwidth_bps) &&
        same(c.density, s.density) && c.n_g == s.n_g)
      labels.push_back(c.label), at[c.label] = &c;
  labels = ordered_labels(labels);
  Figure f;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%gg", bandwidth_bps / 1e9);
  f.name = std::string("breakdown-") + rate;
  f.title = "Iteration time breakdown (" + std::to_string(s.workers) + " workers, " +
            rate_text(bandwidth_bps) + ", d = " + num_text(s.density) + ")";
  f.caption =
      "Mean time per iteration: compute (given or measured from a training run), selection, "
      "communication (all-gathers, all-reduce, broadcast in wall time over the shaped links) and "
      "the other non-communication phases (accumulate, update, bookkeeping).";
  std::ostringstream os;
  os << "label,compute,select,communication,other\n";
  for (const auto& l : labels) {
    const auto& c = *at[l];
    os << l << ',' << num_text(c.compute_ms) << ',' << num_text(c.select_ms) << ','
       << num_text(c.comm_ms) << ',' << num_text(std::max(0.0, c.non_comm_ms - c.select_ms))
       << '\n';
  }
  f.csv = os.str();
  f.plot =
      "set style data histograms; set style histogram rowstacked; set style fill solid 0.8 "
      "border -1; set boxwidth 0.7; set ylabel 'time per iteration (ms)'; set yrange [0:*]; set "
      "xtics rotate by "
      "-25; set key outside right top;\n"
      "plot 'DATA' using 2:xtic(1) title columnheader(2), '' using 3 title columnheader(3), '' "
      "using 4 title columnheader(4), '' using 5 title columnheader(5)";
  return f;
}

Figure model_curves_figure(const std::vector<MeasuredCell>& cells, const ScaleModel& model,
                           const Setting& s, double bandwidth_bps) {
  std::vector<std::string> labels;
  std::set<int> ws;
  std::map<std::pair<std::string, int>, double> meas;
  for (const auto& c : cells)
    if (same(c.density, s.density) && c.n_g == s.n_g) {
      labels.push_back(c.label);
      if (same(c.bandwidth_bps, bandwidth_bps))
        ws.insert(c.workers), meas[{c.label, c.workers}] = c.iter_ms;
    }
  labels = ordered_labels(labels);
  for (int w = 2; w <= 256; w *= 2) ws.insert(w);
  Figure f;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%gg", bandwidth_bps / 1e9);
  f.name = std::string("model-") + rate;
  f.title = "Scale model: iteration time against workers at " + rate_text(bandwidth_bps) +
            " (d = " + num_text(s.density) + ", n_g = " + std::to_string(s.n_g) + ")";
  f.caption =
      "Lines: predicted iteration time with a stated per-message latency of " +
      num_text(kStatedAlphaS * 1e6) +
      " us (model.csv's stated_iter_ms: W machines, not W processes sharing this machine's "
      "cores); points: measured (cells.csv), where this rate was measured, which include the "
      "emulation's larger per-message cost (model.csv's pred_iter_ms and the model's error table "
      "use that fitted latency).";
  std::ostringstream os;
  os << "workers";
  for (const auto& l : labels) os << ",model " << l;
  for (const auto& l : labels) os << ",measured " << l;
  os << '\n';
  for (int w : ws) {
    os << w;
    for (const auto& l : labels)
      os << ','
         << num_text(model
                         .predict(l, w, bandwidth_bps, s.density, static_cast<double>(s.n_g),
                                  Latency::kStated)
                         .iter_ms);
    for (const auto& l : labels) {
      const auto it = meas.find({l, w});
      os << ',' << (it == meas.end() ? "nan" : num_text(it->second));
    }
    os << '\n';
  }
  f.csv = os.str();
  const auto n = std::to_string(labels.size());
  f.plot =
      "set xlabel 'workers W'; set ylabel 'iteration time (ms)'; set logscale x 2; set "
      "logscale y 10; set format y '%g'; set xtics 2; set xrange [1.6:320];\n"
      "plot for [i=1:" +
      n + "] 'DATA' using 1:(column(1+i)) with lines lw 2 lc i title columnheader(1+i)";
  // Measured points only where this rate was measured (no empty legend entries).
  if (!meas.empty())
    f.plot += ", for [i=1:" + n + "] 'DATA' using 1:(column(1+" + n +
              "+i)) with points pt (2*i+3) ps 1.4 lc i title columnheader(1+" + n + "+i)";
  return f;
}

Figure predicted_vs_measured_figure(const std::vector<ModelError>& errors,
                                    const std::vector<ModelError>& errors_at_w) {
  EXDYNA_CHECK(errors_at_w.empty() || errors_at_w.size() == errors.size(),
               "predicted-vs-measured: ", errors.size(), " pooled errors against ",
               errors_at_w.size(), " at W");
  Figure f;
  f.name = "predicted-vs-measured";
  f.title = "Scale model: predicted against measured iteration time";
  f.caption =
      "Every measured cell: filled, the model with alpha and beta fitted at the cell's W (what "
      "the emulated links did there); open, the link's single fit over every W (the one the "
      "predictions beyond the measured W use). The solid line is equality, the dashed lines "
      "+-20 % (the target).";
  std::vector<std::string> labels;
  std::ostringstream os;
  os << "label,workers,bandwidth_bps,density,measured_ms,predicted_ms,rel_error,"
        "predicted_at_w_ms,rel_error_at_w\n";
  for (std::size_t i = 0; i < errors.size(); ++i) {
    const auto& e = errors[i];
    labels.push_back(e.cell.label);
    os << e.cell.label << ',' << e.cell.workers << ',' << num_text(e.cell.bandwidth_bps) << ','
       << num_text(e.cell.density) << ',' << num_text(e.cell.iter_ms) << ','
       << num_text(e.pred.iter_ms) << ',' << cell_or_nan(e.rel_error) << ',';
    if (errors_at_w.empty())
      os << "nan,nan\n";
    else
      os << num_text(errors_at_w[i].pred.iter_ms) << ',' << cell_or_nan(errors_at_w[i].rel_error)
         << '\n';
  }
  labels = ordered_labels(labels);
  f.csv = os.str();
  const std::string pick = "(strcol(1) eq word(L, i) ? ";
  f.plot =
      "set xlabel 'measured iteration time (ms)'; set ylabel 'predicted iteration time "
      "(ms)'; set logscale xy; set key inside left top opaque box;\n"
      "L = '" +
      words(labels) +
      "'\n"
      "plot for [i=1:words(L)] 'DATA' using 5:" +
      pick +
      "$8 : NaN) with points pt 7 ps 1.3 "
      "lc i title word(L, i), for [i=1:words(L)] 'DATA' using 5:" +
      pick +
      "$6 : NaN) with "
      "points pt 6 ps 1.3 lc i notitle, NaN with points pt 6 ps 1.3 lc 'black' title 'open: "
      "fit over every W', x with lines lc 'black' title 'equal', 1.2*x with lines dt 2 lc "
      "'gray' title '+20 %', 0.8*x with lines dt 2 lc 'gray' title '-20 %'";
  return f;
}

namespace {

using sim::run_capture;
using sim::shell_quote;

// gnuplot single-quoted string: '' stands for one quote.
std::string gp_string(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

}  // namespace

fs::path draw_figure(const fs::path& dir, const Figure& f, const std::string& gnuplot,
                     std::string* why) {
  // Asked once per gnuplot binary: pngcairo where it has it (anti-aliased), else libgd's png.
  static std::map<std::string, std::string> terminals;
  auto& terminal = terminals[gnuplot];
  if (terminal.empty()) {
    const auto terms = run_capture(shell_quote(gnuplot) + " -e 'set terminal' 2>&1");
    terminal = terms.find("pngcairo") != std::string::npos ? "pngcairo size 1000,600 font ',11'"
                                                           : "png size 1000,600";
  }
  const std::string base = "fig-" + f.name;
  core::write_file_atomic(dir / (base + ".csv"), f.csv);
  std::string body = f.plot;
  for (std::size_t p; (p = body.find("'DATA'")) != std::string::npos;)
    body.replace(p, 6, gp_string(base + ".csv"));
  std::ostringstream gp;
  gp << "# Draws " << base << ".png from " << base << ".csv; run in this directory: gnuplot "
     << base << ".gp\n"
     << "set terminal " << terminal << "\nset output " << gp_string(base + ".png.tmp") << "\n"
     << "set datafile separator ','\nset termoption noenhanced\nset grid\n"
     << "set key autotitle columnhead\n"
     // Eight colours that stay apart on white and for colour-blind readers (no yellow).
     << "set linetype 1 lc rgb '#000000'\nset linetype 2 lc rgb '#E69F00'\n"
     << "set linetype 3 lc rgb '#56B4E9'\nset linetype 4 lc rgb '#009E73'\n"
     << "set linetype 5 lc rgb '#D55E00'\nset linetype 6 lc rgb '#0072B2'\n"
     << "set linetype 7 lc rgb '#CC79A7'\nset linetype 8 lc rgb '#999999'\n"
     << "set linetype cycle 8\n"
     << "set key outside right top\nset title " << gp_string(f.title) << "\n"
     << body << "\nset output\n";
  core::write_file_atomic(dir / (base + ".gp"), gp.str());
  const auto png = dir / (base + ".png");
  const auto tmp = dir / (base + ".png.tmp");
  const auto err = run_capture("cd " + shell_quote(dir.string()) + " && " + shell_quote(gnuplot) +
                               " " + shell_quote(base + ".gp") + " 2>&1");
  std::error_code ec;
  if (fs::exists(tmp, ec) && fs::file_size(tmp, ec) > 0) {
    fs::rename(tmp, png);
    // The script names the final file for anyone who reruns it.
    auto text = gp.str();
    text.replace(text.find(base + ".png.tmp"), base.size() + 8, base + ".png");
    core::write_file_atomic(dir / (base + ".gp"), text);
    return png;
  }
  fs::remove(tmp, ec);
  if (why) *why = "gnuplot did not draw " + base + ".png: " + (err.empty() ? "no output" : err);
  return {};
}

std::string figure_md(const fs::path& dir, const Figure& f, const std::string& gnuplot,
                      const std::string& regenerate, std::vector<fs::path>& drawn,
                      std::vector<std::string>& notes) {
  if (f.name.empty()) return "";
  if (std::count(f.csv.begin(), f.csv.end(), '\n') < 2) {
    notes.push_back("no data for " + f.title);
    return "### " + f.title + "\n\n*No measured cell at this setting: not drawn.*\n\n";
  }
  std::string why;
  const auto png = draw_figure(dir, f, gnuplot, &why);
  std::ostringstream os;
  os << "### " << f.title << "\n\n";
  if (png.empty()) {
    os << "*Not drawn: " << why << "* The data are in `fig-" << f.name << ".csv`.\n\n";
    notes.push_back(why);
  } else {
    drawn.push_back(png);
    os << "![" << f.title << "](fig-" << f.name << ".png)\n\n";
  }
  os << f.caption << " Data: `fig-" << f.name << ".csv`. Regenerate: `" << regenerate
     << "` (this figure alone: `gnuplot fig-" << f.name << ".gp` in the output directory).\n\n";
  return os.str();
}

}  // namespace exdyna::eval
