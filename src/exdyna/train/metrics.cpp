#include "exdyna/train/metrics.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <variant>

#include "exdyna/core/atomic_file.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/step_stats_fields.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;

void atomic_write(const std::string& path, std::string_view content) {
  const auto parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  core::write_file_atomic(path, content);
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

namespace {
// Short name in the CSV writers below.
std::string num(double v) {
  return format_number(v);
}
}  // namespace

std::string RunLog::iteration_csv() const {
  std::ostringstream os;
  const int workers =
      iters_.empty() ? 0 : static_cast<int>(iters_.front().stats.k_per_worker.size());
  os << "step,epoch,wall_s,loss,lr,t_compute,t_optimizer";
  for (const auto& c : sparsifiers::step_stat_columns(workers)) os << ',' << c;
  os << "\n";
  for (const auto& r : iters_) {
    os << r.step << ',' << num(r.epoch) << ',' << num(r.wall_s) << ',' << num(r.loss) << ','
       << num(r.lr) << ',' << num(r.t_compute) << ',' << num(r.t_optimizer);
    for (const auto& v : sparsifiers::step_stat_values(r.stats, workers)) {
      os << ',';
      if (const auto* i = std::get_if<std::int64_t>(&v))
        os << *i;
      else
        os << num(std::get<double>(v));
    }
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
