#include "exdyna/train/plots.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "exdyna/sim/shell.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;

namespace {

using sim::run_capture;
using sim::shell_quote;

struct Plot {
  std::string file, body;
};

// Writes dir/time_breakdown.dat: the mean time per phase, for the breakdown plot.
void write_time_breakdown(const fs::path& d, const RunLog& log) {
  double tc = 0, ta = 0, tsel = 0, tag = 0, tar = 0, tb = 0, tu = 0, to = 0;
  for (const auto& r : log.iters()) {
    tc += r.t_compute;
    ta += r.stats.times.accumulate;
    tsel += r.stats.times.select;
    tag += r.stats.times.allgather;
    tar += r.stats.times.allreduce;
    tb += r.stats.times.broadcast;
    tu += r.stats.times.update + r.t_optimizer;
    to += r.stats.times.other;
  }
  const double n = std::max<double>(1.0, static_cast<double>(log.iters().size()));
  std::ostringstream tbd;
  tbd << "phase ms\ncompute " << 1e3 * tc / n << "\naccumulate " << 1e3 * ta / n << "\nselect "
      << 1e3 * tsel / n << "\nall-gather " << 1e3 * tag / n << "\nall-reduce " << 1e3 * tar / n
      << "\nbroadcast " << 1e3 * tb / n << "\nupdate " << 1e3 * tu / n << "\nother " << 1e3 * to / n
      << "\n";
  atomic_write((d / "time_breakdown.dat").string(), tbd.str());
}

// The plots this log has data for, as gnuplot commands over the CSVs in d.
std::vector<Plot> plot_list(const fs::path& d, const RunLog& log, double target_density) {
  // Paper Fig. 10: the global error scaled by sum(threshold) / sum(global error).
  double st = 0, se = 0;
  bool have_thr = false;
  for (const auto& r : log.iters()) {
    if (!std::isnan(r.stats.threshold) && !std::isnan(r.stats.global_error)) {
      st += r.stats.threshold;
      se += r.stats.global_error;
      have_thr = true;
    }
  }
  const double scale = se > 0 ? st / se : 1.0;
  const auto iters = shell_quote((d / "iterations.csv").string());
  // A target that changes (DGC's density warm-up) is drawn from the log, else as a constant.
  bool varies = false;
  for (const auto& r : log.iters()) varies = varies || r.stats.target_density != target_density;
  const std::string target_line =
      varies ? iters + " using 'step':'target_density'" : format_number(target_density);
  const auto evals = shell_quote((d / "eval.csv").string());
  std::vector<Plot> plots;
  plots.push_back(
      {"loss_vs_time.png",
       "set xlabel 'wall-clock time (s)'; set ylabel 'training loss (mean over workers)';"
       "plot " +
           iters + " using 'wall_s':'loss' with lines lw 1 title 'loss'"});
  bool have_acc = false;
  for (const auto& e : log.evals()) have_acc = have_acc || !std::isnan(e.test_accuracy);
  if (have_acc)
    plots.push_back(
        {"accuracy_vs_time.png",
         "set xlabel 'wall-clock time (s)'; set ylabel 'test accuracy (%)'; set key bottom right;"
         "plot " +
             evals +
             " using 'wall_s':(100*column('test_accuracy')) with linespoints lw 2 title 'test "
             "accuracy'"});
  else if (!log.evals().empty())  // language models: perplexity instead
    plots.push_back(
        {"perplexity_vs_time.png",
         "set xlabel 'wall-clock time (s)'; set ylabel 'test perplexity';"
         "plot " +
             evals +
             " using 'wall_s':'test_perplexity' with linespoints lw 2 title 'test perplexity'"});
  plots.push_back({"density.png",
                   "set xlabel 'iteration'; set ylabel 'density'; set logscale y;"
                   "plot " +
                       iters + " using 'step':'density' with lines title 'actual density', " +
                       target_line + " with lines lw 2 dt 2 title 'target density'"});
  if (have_thr)
    plots.push_back({"threshold.png",
                     "set xlabel 'iteration'; set ylabel 'value'; set logscale y;"
                     "plot " +
                         iters + " using 'step':'threshold' with lines title 'threshold', " +
                         iters + " using 'step':(column('global_error')*" + format_number(scale) +
                         ") with lines title 'global error x " + format_number(scale) +
                         " (paper Fig. 10 scaling)'"});
  plots.push_back({"f_t.png",
                   "set xlabel 'iteration'; set ylabel 'f(t) = n max k_i / k''';"
                   "plot " +
                       iters + " using 'step':'f_t' with lines title 'f(t)'"});
  plots.push_back(
      {"time_breakdown.png",
       "set ylabel 'mean time per iteration (ms)'; set style fill solid 0.6; set boxwidth 0.6; "
       "set xtics rotate by -30; unset key; plot " +
           shell_quote((d / "time_breakdown.dat").string()) +
           " using 0:2:xtic(1) every ::1 with boxes"});
  return plots;
}

// The gnuplot script drawing every plot into <file>.tmp.png beside its final name.
std::string plot_script(const fs::path& d, const std::vector<Plot>& plots, const std::string& term,
                        const std::string& title) {
  std::ostringstream script;
  script << "set datafile separator ','; set terminal " << term << "; set grid;\n";
  for (const auto& p : plots) {
    const std::string tmp = (d / (p.file + ".tmp.png")).string();
    const bool breakdown = p.file == "time_breakdown.png";
    script << "reset; set grid; set datafile separator " << (breakdown ? "whitespace" : "','")
           << ";\n"
           << "set title " << shell_quote(title + ": " + p.file.substr(0, p.file.size() - 4))
           << " noenhanced;\n"
           << "set output " << shell_quote(tmp) << ";\n"
           << p.body << ";\nset output;\n";
  }
  return script.str();
}

}  // namespace

std::vector<std::string> write_plots(const std::string& dir, const RunLog& log,
                                     double target_density, const std::string& title,
                                     std::string* why) {
  std::vector<std::string> written;
  if (run_capture("command -v gnuplot").empty()) {
    if (why) *why = "gnuplot not found (install the Debian package gnuplot-nox); no plots drawn";
    return written;
  }
  const std::string terms = run_capture("gnuplot -e 'set terminal' 2>&1");
  const std::string term = terms.find("pngcairo") != std::string::npos
                               ? "pngcairo size 900,560 font ',10'"
                               : "png size 900,560";
  const fs::path d(dir);
  write_time_breakdown(d, log);
  const auto plots = plot_list(d, log, target_density);
  const auto script_path = (d / "plots.gp").string();
  atomic_write(script_path, plot_script(d, plots, term, title));
  const std::string err = run_capture("gnuplot " + shell_quote(script_path) + " 2>&1");
  for (const auto& p : plots) {
    const auto tmp = d / (p.file + ".tmp.png");
    if (fs::exists(tmp) && fs::file_size(tmp) > 0) {
      fs::rename(tmp, d / p.file);
      written.push_back((d / p.file).string());
    } else {
      fs::remove(tmp);
    }
  }
  if (written.size() < plots.size() && why)
    *why = "gnuplot drew " + std::to_string(written.size()) + " of " +
           std::to_string(plots.size()) + " plots: " + err;
  return written;
}

}  // namespace exdyna::train
