#include "exdyna/train/metrics.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "exdyna/core/atomic_file.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;

void atomic_write(const std::string& path, std::string_view content) {
  const auto parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  core::write_file_atomic(path, content);
}

namespace {
std::string num(double v) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}
}  // namespace

std::string RunLog::iteration_csv() const {
  std::ostringstream os;
  const std::size_t n = iters_.empty() ? 0 : iters_.front().stats.k_per_worker.size();
  const std::size_t np = iters_.empty() ? 0 : iters_.front().stats.blocks_per_partition.size();
  os << "step,epoch,wall_s,loss,lr,threshold,k_target,k_total,k_unique,density,target_density,"
        "density_error,f_t,"
        "padded_elements,global_error,bytes_allgather_counts,bytes_allgather_indices,bytes_"
        "allreduce,"
        "bytes_broadcast,bytes_total,t_compute,t_accumulate,t_select,t_allgather,t_allreduce,t_"
        "broadcast,"
        "t_update,t_other,t_optimizer";
  for (std::size_t i = 0; i < n; ++i) os << ",k_w" << i;
  for (std::size_t i = 0; i < n; ++i) os << ",alloc_w" << i;
  for (std::size_t i = 0; i < np; ++i) os << ",blocks_p" << i;
  os << "\n";
  for (const auto& r : iters_) {
    const auto& s = r.stats;
    os << r.step << ',' << num(r.epoch) << ',' << num(r.wall_s) << ',' << num(r.loss) << ','
       << num(r.lr) << ',' << num(s.threshold) << ',' << s.k_target << ',' << s.k_total << ','
       << s.k_unique << ',' << num(s.density) << ',' << num(s.target_density) << ','
       << num(s.density_error) << ',' << num(s.f_t) << ',' << s.padded_elements << ','
       << num(s.global_error) << ',' << s.bytes.allgather_counts << ',' << s.bytes.allgather_indices
       << ',' << s.bytes.allreduce << ',' << s.bytes.broadcast << ',' << s.bytes.total() << ','
       << num(r.t_compute) << ',' << num(s.times.accumulate) << ',' << num(s.times.select) << ','
       << num(s.times.allgather) << ',' << num(s.times.allreduce) << ',' << num(s.times.broadcast)
       << ',' << num(s.times.update) << ',' << num(s.times.other) << ',' << num(r.t_optimizer);
    for (std::size_t i = 0; i < n; ++i)
      os << ',' << (i < s.k_per_worker.size() ? s.k_per_worker[i] : 0);
    for (std::size_t i = 0; i < n; ++i)
      os << ',' << (i < s.alloc_per_worker.size() ? s.alloc_per_worker[i] : -1);
    for (std::size_t i = 0; i < np; ++i)
      os << ',' << (i < s.blocks_per_partition.size() ? s.blocks_per_partition[i] : 0);
    os << "\n";
  }
  return os.str();
}

std::string RunLog::eval_csv() const {
  std::ostringstream os;
  os << "epoch,step,wall_s,train_loss,test_loss,test_accuracy,test_perplexity\n";
  for (const auto& e : evals_)
    os << e.epoch << ',' << e.step << ',' << num(e.wall_s) << ',' << num(e.train_loss) << ','
       << num(e.test_loss) << ',' << num(e.test_accuracy) << ',' << num(e.test_perplexity) << "\n";
  return os.str();
}

double RunLog::mean_density(std::size_t skip) const {
  double s = 0;
  std::size_t n = 0;
  for (std::size_t i = skip; i < iters_.size(); ++i, ++n) s += iters_[i].stats.density;
  return n ? s / static_cast<double>(n) : std::nan("");
}

double RunLog::mean_f_t(std::size_t skip) const {
  double s = 0;
  std::size_t n = 0;
  for (std::size_t i = skip; i < iters_.size(); ++i, ++n) s += iters_[i].stats.f_t;
  return n ? s / static_cast<double>(n) : std::nan("");
}

namespace {

std::string run_capture(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
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
  // Mean time per phase, for the breakdown.
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

  const auto iters = shell_quote((d / "iterations.csv").string());
  const auto evals = shell_quote((d / "eval.csv").string());
  struct Plot {
    std::string file, body;
  };
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
                       num(target_density) + " with lines lw 2 dt 2 title 'target density'"});
  if (have_thr)
    plots.push_back({"threshold.png",
                     "set xlabel 'iteration'; set ylabel 'value'; set logscale y;"
                     "plot " +
                         iters + " using 'step':'threshold' with lines title 'threshold', " +
                         iters + " using 'step':(column('global_error')*" + num(scale) +
                         ") with lines title 'global error x " + num(scale) +
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
  const auto script_path = (d / "plots.gp").string();
  atomic_write(script_path, script.str());
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

Progress::Progress(std::int64_t total_steps, bool enabled)
    : total_(total_steps > 0 ? total_steps : 1), enabled_(enabled), tty_(::isatty(2) != 0) {}

void Progress::update(std::int64_t step, double elapsed_s, double loss, double density,
                      double samples_per_s) {
  if (!enabled_) return;
  const double frac = static_cast<double>(step) / static_cast<double>(total_);
  const double eta = frac > 0 ? elapsed_s * (1 - frac) / frac : 0;
  char stats[160];
  std::snprintf(stats, sizeof stats, "%lld/%lld ETA %4.0fs loss %.4f density %.5f %.0f samples/s",
                static_cast<long long>(step), static_cast<long long>(total_), eta, loss, density,
                samples_per_s);
  if (tty_) {
    if (elapsed_s - last_draw_ < 0.2 && step < total_) return;
    last_draw_ = elapsed_s;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::cerr << "\r[" << bar << "] " << stats << "\033[K" << std::flush;
    drawn_ = true;
  } else {
    // Ten plain lines per run: friendly to logs and CI.
    const std::int64_t tenth = static_cast<std::int64_t>(frac * 10);
    if (tenth == last_plain_) return;
    last_plain_ = tenth;
    std::cerr << "progress " << static_cast<int>(frac * 100) << "% " << stats << "\n";
  }
}

void Progress::message(const std::string& line) {
  if (!enabled_) return;
  if (tty_ && drawn_) std::cerr << "\r\033[K";
  std::cerr << line << "\n";
  last_draw_ = -1;
}

void Progress::finish() {
  if (enabled_ && tty_ && drawn_) std::cerr << "\n";
  drawn_ = false;
}

}  // namespace exdyna::train
