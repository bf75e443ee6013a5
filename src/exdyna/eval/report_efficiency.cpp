#include "exdyna/eval/report_efficiency.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "exdyna/core/error.hpp"
#include "exdyna/eval/report_figures.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;

namespace {

struct Curve {
  std::vector<double> step, value;
};

struct Workload {
  std::string metric;  // test_accuracy or perplexity
  std::map<std::string, Curve> curves;
};

std::map<std::string, Workload> read_efficiency(const fs::path& path) {
  const auto t = CsvTable::read(path, {"workload", "label", "step", "epoch", "metric", "value"});
  std::map<std::string, Workload> out;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    auto& w = out[t.text(r, "workload")];
    w.metric = t.text(r, "metric");
    auto& c = w.curves[t.text(r, "label")];
    c.step.push_back(t.num(r, "step"));
    c.value.push_back(t.num(r, "value"));
  }
  return out;
}

bool higher_is_better(const std::string& metric) {
  return metric != "perplexity";
}

double best_of(const Curve& c, bool higher) {
  double b = higher ? -INFINITY : INFINITY;
  for (double v : c.value) b = higher ? std::max(b, v) : std::min(b, v);
  return b;
}

double target_for(const Workload& w, const ReportOptions& o) {
  const bool hi = higher_is_better(w.metric);
  if (hi && o.target_accuracy > 0) return o.target_accuracy;
  if (!hi && o.target_perplexity > 0) return o.target_perplexity;
  double ref = 0;
  if (w.curves.count("dense")) {
    ref = best_of(w.curves.at("dense"), hi);
  } else {
    std::vector<double> bests;
    for (const auto& [l, c] : w.curves) bests.push_back(best_of(c, hi));
    std::sort(bests.begin(), bests.end());
    ref = bests[bests.size() / 2];
  }
  return hi ? 0.95 * ref : 1.05 * ref;
}

// First step at which the curve reaches the target; NaN when it never does.
double steps_to(const Curve& c, double target, bool higher) {
  for (std::size_t i = 0; i < c.step.size(); ++i)
    if (higher ? c.value[i] >= target : c.value[i] <= target) return c.step[i];
  return NAN;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string workload_md(const std::string& name, const Workload& w,
                        const std::map<std::string, double>& iter_ms, const Setting& s,
                        const ReportOptions& opts, const fs::path& out_dir,
                        const std::string& regen, std::vector<fs::path>& drawn,
                        std::vector<std::string>& notes) {
  const bool hi = higher_is_better(w.metric);
  const double target = target_for(w, opts);
  std::vector<std::string> labels;
  for (const auto& [l, c] : w.curves) labels.push_back(l);
  labels = ordered_labels(labels);
  std::ostringstream os;
  os << "### Workload " << name << " (" << w.metric << ")\n\nTarget " << w.metric << ": "
     << num_text(target)
     << (hi ? (opts.target_accuracy > 0 ? " (given)" : " (95 % of the dense run's best)")
            : (opts.target_perplexity > 0 ? " (given)" : " (105 % of the dense run's best)"))
     << ".\n\n| label | best " << w.metric << " | iterations to target | emulated iteration (ms) "
     << "| time to target (s) |\n|---|---|---|---|---|\n";
  Figure acc, tta;
  acc.name = "accuracy-time-" + name;
  acc.title = w.metric + " against emulated time (" + name + ", " + setting_text(s) + ")";
  acc.caption =
      "Each evaluation of the training run, at time = its iteration x the label's "
      "emulated iteration time at " +
      setting_text(s) + ".";
  tta.name = "time-to-accuracy-" + name;
  tta.title =
      "Time to " + w.metric + " " + num_text(target) + " (" + name + ", " + setting_text(s) + ")";
  tta.caption =
      "Iterations to reach the target x the emulated iteration time; labels that never "
      "reach it, or have no cell at the setting, have no bar.";
  std::ostringstream acsv, tcsv;
  acsv << "step";
  tcsv << "label,time_to_target_s\n";
  std::size_t rows = 0;
  std::vector<std::string> plotted;
  for (const auto& l : labels) {
    const auto& c = w.curves.at(l);
    const auto it = iter_ms.find(l);
    const double ms = it == iter_ms.end() ? NAN : it->second;
    const double steps = steps_to(c, target, hi);
    const double t = steps * ms / 1e3;
    os << "| " << l << " | " << num_text(best_of(c, hi)) << " | "
       << (std::isnan(steps) ? "not reached" : num_text(steps)) << " | "
       << (std::isnan(ms) ? "no cell" : fmt("%.3f", ms)) << " | "
       << (std::isfinite(t) ? fmt("%.2f", t) : "—") << " |\n";
    tcsv << l << ',' << (std::isfinite(t) ? num_text(t) : "nan") << '\n';
    if (!std::isnan(ms)) {
      plotted.push_back(l);
      acsv << ",time_s " << l << ',' << l;
      rows = std::max(rows, c.step.size());
    }
  }
  acsv << '\n';
  for (std::size_t i = 0; i < rows; ++i) {
    acsv << i;
    for (const auto& l : plotted) {
      const auto& c = w.curves.at(l);
      if (i < c.step.size())
        acsv << ',' << num_text(c.step[i] * iter_ms.at(l) / 1e3) << ',' << num_text(c.value[i]);
      else
        acsv << ",nan,nan";
    }
    acsv << '\n';
  }
  acc.csv = acsv.str();
  const auto n = std::to_string(plotted.size());
  acc.plot =
      "set xlabel 'emulated training time (s)'; set logscale x; set offsets graph 0.05, graph "
      "0.05, graph 0.05, graph 0.05; set ylabel '" +
      w.metric + "'; set key outside right top;\nplot for [i=1:" + n +
      "] 'DATA' using (column(2*i)):(column(2*i+1)) with linespoints lw 2 pt 7 title "
      "columnheader(2*i+1)";
  tta.csv = tcsv.str();
  tta.plot =
      "set style data histograms; set style fill solid 0.8 border -1; set boxwidth 0.7; "
      "set ylabel 'time to target (s)'; set yrange [0:*]; set xtics rotate by -25; unset key;\n"
      "plot 'DATA' using 2:xtic(1)";
  os << '\n';
  // The command of one run, as the pattern of all (each run's is in its directory).
  for (const auto& l : {std::string("exdyna-exact"), labels.front()}) {
    std::ifstream cmd(out_dir / "train" / (name + "-" + l) / "command.txt");
    std::string line;
    if (cmd && std::getline(cmd, line)) {
      os << "Each run's command is in `train/" << name << "-<label>/command.txt`; " << l << "'s: `"
         << line << "`\n\n";
      break;
    }
  }
  if (!plotted.empty())
    os << figure_md(out_dir, acc, opts.gnuplot, regen, drawn, notes)
       << figure_md(out_dir, tta, opts.gnuplot, regen, drawn, notes);
  return os.str();
}

}  // namespace

std::string efficiency_section(const fs::path& out_dir, const std::vector<MeasuredCell>& cells,
                               const ReportOptions& opts, const std::string& regen,
                               std::vector<fs::path>& drawn, std::vector<std::string>& notes) {
  const auto path = out_dir / "efficiency.csv";
  if (!fs::exists(path)) {
    notes.push_back("efficiency.csv is missing: no time to accuracy");
    return "*`efficiency.csv` is missing: no training runs were made (run without `--no-train`), "
           "so accuracy against time and time to accuracy are not reported.*\n\n";
  }
  std::map<std::string, Workload> work;
  try {
    work = read_efficiency(path);
  } catch (const Error& e) {
    notes.push_back(std::string("efficiency.csv not used: ") + e.what());
    return std::string("*`efficiency.csv` could not be read (") + e.what() +
           "); time to accuracy is not reported.*\n\n";
  }
  if (work.empty()) {
    notes.push_back("efficiency.csv has no rows");
    return "*`efficiency.csv` has no rows; time to accuracy is not reported.*\n\n";
  }
  // The headline (W, B, n_g) at the measured density nearest to the training runs' density.
  Setting s = headline_setting(cells);
  for (const auto& c : cells)
    if (std::abs(std::log(c.density / opts.train_density)) <
        std::abs(std::log(s.density / opts.train_density)))
      s.density = c.density;
  std::map<std::string, double> iter_ms;
  for (const auto& c : cells)
    if (c.workers == s.workers && c.bandwidth_bps == s.bandwidth_bps && c.density == s.density &&
        c.n_g == s.n_g)
      iter_ms[c.label] = c.iter_ms;
  std::ostringstream os;
  os << "Short real `exdyna train` runs (their commands and outputs under `train/`) give the "
        "test metric against iterations; the emulated run gives each label's iteration time. "
        "They are combined as **time = iterations x emulated iteration time of the label at "
     << setting_text(s)
     << "**. The training runs use fewer workers than the emulated setting (see "
        "`train/*/summary.json`): the number of iterations to a given accuracy is taken as the "
        "same at the emulated W. The training runs' density is "
     << num_text(opts.train_density) << ".\n\n";
  for (const auto& [name, w] : work)
    os << workload_md(name, w, iter_ms, s, opts, out_dir, regen, drawn, notes);
  return os.str();
}

}  // namespace exdyna::eval
