#include "exdyna/train/train_report.hpp"

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/sparsifiers/step_stats_fields.hpp"
#include "exdyna/train/dgc_momentum.hpp"
#include "exdyna/train/plots.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;

namespace {

// The run's options as summary.json records them.
nlohmann::json options_json(const TrainOptions& o, int world) {
  nlohmann::json j;
  j["model"] = o.model;
  j["model_width"] = o.model_width;
  j["dataset"] = o.dataset;
  j["data_dir"] = o.data_dir;
  j["sparsifier"] = o.sparsifier;
  j["density"] = o.sparse.density;
  j["gather_mode"] = comm::to_string(o.sparse.gather_mode);
  j["values"] = core::to_string(o.sparse.values);
  j["controller"] = sparsifiers::to_string(o.sparse.exdyna.controller);
  j["balance"] = sparsifiers::to_string(o.sparse.exdyna.balance);
  j["workers"] = world;
  j["epochs"] = o.epochs;
  j["max_steps"] = o.max_steps;
  j["batch_size_per_worker"] = o.batch_size;
  j["lr"] = o.sgd.lr;
  j["momentum"] = o.sgd.momentum;
  j["nesterov"] = o.sgd.nesterov;
  j["weight_decay"] = o.sgd.weight_decay;
  j["warmup_epochs"] = o.schedule.warmup_epochs;
  j["lr_decay_epochs"] = o.schedule.decay_epochs;
  j["lr_decay_factor"] = o.schedule.decay_factor;
  j["clip_norm"] = o.clip_norm;
  j["dgc_warmup_epochs"] = o.dgc_warmup_epochs;
  if (o.dgc_warmup_epochs > 0) {
    j["dgc_warmup_start"] = o.dgc_warmup_start;
    nlohmann::json d = nlohmann::json::array();  // epoch 1, 2, ..., then the target from E + 1
    for (std::int64_t e = 0; e <= o.dgc_warmup_epochs; ++e)
      d.push_back(dgc_warmup_density(e, o.dgc_warmup_epochs, o.dgc_warmup_start, o.sparse.density));
    j["dgc_warmup_densities"] = d;
  }
  j["seed"] = o.seed;
  j["resume"] = o.resume;
  return j;
}

nlohmann::json num(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// The environment setting that repeats a run with this switch bit for bit.
std::string repeat_setting(const comm::Communicator::AlgorithmSwitch& s) {
  return "EXDYNA_GLOO_LOG_BELOW=" + s.setting();
}

// FNV-1a of rank 0's final parameter bytes: lets scripts check bit-identical runs.
std::string params_fnv1a(const std::vector<float>& params) {
  const std::uint64_t h = core::fnv1a(std::as_bytes(std::span(params)));
  std::ostringstream hx;
  hx << std::hex << std::setw(16) << std::setfill('0') << h;
  return hx.str();
}

nlohmann::json evaluations_json(const RunLog& log) {
  nlohmann::json ev = nlohmann::json::array();
  for (const auto& e : log.evals())
    ev.push_back({{"epoch", e.epoch},
                  {"step", e.step},
                  {"wall_s", e.wall_s},
                  {"train_loss", num(e.train_loss)},
                  {"test_loss", num(e.test_loss)},
                  {"test_accuracy", num(e.test_accuracy)},
                  {"test_perplexity", num(e.test_perplexity)}});
  return ev;
}

// The mean over the run's iterations of every scalar statistic, by its CSV column name (null where
// not finite: the threshold of a sparsifier without one, a global error not measured).
nlohmann::json step_means_json(const RunLog& log) {
  const auto columns = sparsifiers::step_scalar_columns();
  std::vector<double> sum(columns.size(), 0.0);
  for (const auto& r : log.iters()) {
    const auto values = sparsifiers::step_scalar_values(r.stats);
    for (std::size_t i = 0; i < values.size(); ++i)
      sum[i] += sparsifiers::stat_as_double(values[i]);
  }
  const auto n = static_cast<double>(log.iters().size());
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t i = 0; i < columns.size(); ++i) j[columns[i]] = num(sum[i] / n);
  return j;
}

}  // namespace

std::string dgc_warmup_text(const TrainOptions& o) {
  if (o.dgc_warmup_epochs <= 0) return "";
  std::ostringstream os;
  os << std::setprecision(4);
  for (std::int64_t e = 0; e < o.dgc_warmup_epochs; ++e)
    os << dgc_warmup_density(e, o.dgc_warmup_epochs, o.dgc_warmup_start, o.sparse.density)
       << " (epoch " << e + 1 << "), ";
  os << "then " << o.sparse.density << " from epoch " << o.dgc_warmup_epochs + 1;
  return os.str();
}

std::string start_line(const TrainOptions& opts, const DataBundle& data, int world,
                       std::string_view engine, std::int64_t n_g, std::int64_t steps_left,
                       std::int64_t steps_per_epoch) {
  return detail::concat(
      "exdyna train: ", opts.model, " on ", data.text ? data.text->source : data.train_images->name,
      ", ", world, " workers on ", engine, ", sparsifier ", opts.sparsifier, " at density ",
      opts.sparse.density, ", n_g = ", n_g, ", ", steps_left, " steps (", steps_per_epoch,
      " per epoch)",
      opts.dgc_warmup_epochs > 0 ? "; DGC density warm-up: " + dgc_warmup_text(opts)
                                 : std::string());
}

std::string eval_line(const EvalRecord& e, bool lm, double mean_density, double wall_s) {
  std::ostringstream line;
  line << "epoch " << e.epoch << " step " << e.step << ": train loss " << std::setprecision(4)
       << e.train_loss << ", test loss " << e.test_loss;
  if (lm)
    line << ", test perplexity " << std::setprecision(5) << e.test_perplexity;
  else
    line << ", test accuracy " << std::setprecision(4) << 100 * e.test_accuracy << "%";
  line << ", mean density " << std::setprecision(4) << mean_density << " (" << std::setprecision(3)
       << wall_s << " s)";
  return line.str();
}

void write_logs(const std::string& out_dir, const RunLog& log) {
  atomic_write((fs::path(out_dir) / "iterations.csv").string(), log.iteration_csv());
  atomic_write((fs::path(out_dir) / "eval.csv").string(), log.eval_csv());
}

void write_run_files(const TrainOptions& opts, int world, std::string_view engine,
                     std::int64_t steps_per_epoch, TrainResult& res) {
  write_logs(opts.out_dir, res.log);
  const std::string title = opts.model + " " + opts.dataset + " " + opts.sparsifier +
                            " d=" + detail::concat(opts.sparse.density) +
                            " n=" + std::to_string(world);
  std::vector<std::string> plots;
  if (opts.plots)
    plots = write_plots(opts.out_dir, res.log, opts.sparse.density, title, &res.plot_note);
  nlohmann::json j;
  j["options"] = options_json(opts, world);
  j["engine"] = std::string(engine);
  j["n_g"] = res.n_g;
  j["steps"] = res.steps;
  j["steps_per_epoch"] = steps_per_epoch;
  j["test_accuracy"] = num(res.test_accuracy);
  j["test_loss"] = num(res.test_loss);
  j["test_perplexity"] = num(res.test_perplexity);
  j["first_train_loss"] = num(res.first_train_loss);
  j["last_train_loss"] = num(res.last_train_loss);
  j["mean_density"] = num(res.mean_density);
  j["mean_density_over_target"] = num(res.mean_density / opts.sparse.density);
  j["mean_f_t"] = num(res.mean_f_t);
  j["elapsed_s"] = res.elapsed_s;
  j["params_fnv1a"] = params_fnv1a(res.params);
  j["repeat_with"] = res.algorithm_switch ? nlohmann::json(repeat_setting(*res.algorithm_switch))
                                          : nlohmann::json(nullptr);
  j["samples_per_s"] = res.samples_per_s;
  const nlohmann::json means = step_means_json(res.log);
  j["mean_bytes_per_iteration"] =
      res.log.iters().empty() ? 0.0 : means.at("bytes_total").get<double>();
  j["step_means"] = means;
  j["evaluations"] = evaluations_json(res.log);
  res.files.push_back((fs::path(opts.out_dir) / "iterations.csv").string());
  res.files.push_back((fs::path(opts.out_dir) / "eval.csv").string());
  const auto summary = (fs::path(opts.out_dir) / "summary.json").string();
  res.files.push_back(summary);
  for (const auto& f : plots) res.files.push_back(f);
  j["files"] = res.files;
  j["plot_note"] = res.plot_note;
  atomic_write(summary, j.dump(2) + "\n");
}

std::string summary_table(const TrainOptions& o, int world, const TrainResult& r) {
  std::ostringstream os;
  auto row = [&](const std::string& k, const std::string& v) {
    os << "  " << std::left << std::setw(28) << k << v << "\n";
  };
  auto f = [](double v, int prec) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(prec) << v;
    return s.str();
  };
  os << "\nexdyna train: summary\n";
  row("model / dataset", o.model + " / " + o.dataset);
  row("sparsifier", o.sparsifier + " (target density " + detail::concat(o.sparse.density) + ")");
  if (o.dgc_warmup_epochs > 0) row("dgc density warm-up", dgc_warmup_text(o));
  row("workers", std::to_string(world));
  row("steps", std::to_string(r.steps) + " (n_g = " + std::to_string(r.n_g) + ")");
  if (o.model == "lstm")
    row("test perplexity", f(r.test_perplexity, 2));
  else
    row("test accuracy", f(100 * r.test_accuracy, 2) + " %");
  row("test loss", f(r.test_loss, 4));
  row("train loss first -> last", f(r.first_train_loss, 4) + " -> " + f(r.last_train_loss, 4));
  row("mean actual density", f(r.mean_density, 6) + " (" +
                                 f(100 * r.mean_density / o.sparse.density, 1) + " % of target)");
  row("mean f(t)", f(r.mean_f_t, 3));
  row("wall time", f(r.elapsed_s, 1) + " s");
  row("throughput", f(r.samples_per_s, 0) + (o.model == "lstm" ? " sequences/s" : " samples/s"));
  if (r.algorithm_switch) row("repeat bit for bit with", repeat_setting(*r.algorithm_switch));
  if (!r.files.empty()) {
    os << "  files:\n";
    for (const auto& p : r.files) os << "    " << p << "\n";
  }
  if (!r.plot_note.empty()) os << "  note: " << r.plot_note << "\n";
  return os.str();
}

}  // namespace exdyna::train
