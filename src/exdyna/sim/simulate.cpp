#include "exdyna/sim/simulate.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <ostream>
#include <sstream>
#include <tuple>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/timer.hpp"
#include "exdyna/sim/scaled_source.hpp"
#include "exdyna/sim/trace_source.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"

namespace exdyna::sim {

namespace fs = std::filesystem;

namespace {

// CPU seconds of the calling thread: a step's own work, which W ranks sharing fewer cores do not
// inflate (waiting in a collective costs none), unlike its wall time.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// An output file must be creatable: checked before a long run rather than after it.
void check_output_path(const fs::path& p, const char* option) {
  if (p.empty()) return;
  std::error_code ec;
  const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
  EXDYNA_CHECK_ARG(fs::is_directory(parent, ec), option, " '", p.string(), "': directory '",
                   parent.string(), "' does not exist; expected a file in an existing directory");
  EXDYNA_CHECK_ARG(!fs::is_directory(p, ec), option, " '", p.string(),
                   "' is a directory; expected a file name");
}

void append_double(std::string& s, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  s += buf;
}
void append_int(std::string& s, std::int64_t v) {
  s += std::to_string(v);
}

template <typename T>
T at_or(const std::vector<T>& v, std::size_t i, T fallback) {
  return i < v.size() ? v[i] : fallback;
}

Summary::Range range_of(std::span<const double> xs) {
  Summary::Range r;
  if (xs.empty()) return r;
  r.min = std::numeric_limits<double>::infinity();
  r.max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (double x : xs) {
    sum += x;
    r.min = std::min(r.min, x);
    r.max = std::max(r.max, x);
  }
  r.mean = sum / static_cast<double>(xs.size());
  return r;
}

std::string source_name(const SimulateConfig& cfg) {
  return cfg.trace_dir.empty() ? std::string("synthetic source")
                               : "trace '" + cfg.trace_dir.string() + "'";
}

// The scale steps as the synthetic source's describe() lists them.
std::string describe_steps(std::span<const ScaleStep> steps) {
  std::ostringstream os;
  for (const auto& s : steps) os << ", x" << s.factor << " at " << s.iteration;
  return os.str();
}

}  // namespace

void SimulateConfig::validate() const {
  EXDYNA_CHECK_ARG(!sparsifier.empty(),
                   "sparsifier name is empty; expected one of the registered names");
  EXDYNA_CHECK_ARG(!workers || (*workers >= 1 && *workers <= 4096), "workers ", workers.value_or(0),
                   " is not valid; expected 1..4096");
  EXDYNA_CHECK_ARG(!iterations || *iterations >= 1, "iterations ", iterations.value_or(0),
                   " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(std::isfinite(sparse.density) && sparse.density > 0 && sparse.density <= 1,
                   "density ", sparse.density, " is not valid; expected a value in (0, 1]");
  EXDYNA_CHECK_ARG(std::isfinite(timeout_s) && timeout_s > 0, "timeout ", timeout_s,
                   " s is not valid; expected a finite number of seconds > 0");
  if (!trace_dir.empty()) {
    EXDYNA_CHECK_ARG(!n_grad, "--n-grad ", n_grad.value_or(0), " and --trace '", trace_dir.string(),
                     "' conflict; expected one of them (a trace fixes n_g in its meta.json)");
    validate_scale_steps(synthetic.scale_steps);
  } else {
    synthetic_options().validate();
  }
  check_output_path(decisions_path, "--decisions");
  check_output_path(stats_path, "--stats");
}

SyntheticOptions SimulateConfig::synthetic_options() const {
  SyntheticOptions o = synthetic;
  o.n_g = n_grad.value_or(kDefaultNg);
  o.seed = seed;
  return o;
}

std::string SimulateConfig::describe_source() const {
  if (trace_dir.empty()) return synthetic_options().describe();
  return "trace '" + trace_dir.string() + "'" + describe_steps(synthetic.scale_steps);
}

std::unique_ptr<GradientSource> make_source(const SimulateConfig& cfg) {
  if (!cfg.trace_dir.empty()) {
    auto trace = std::make_unique<TraceSource>(cfg.trace_dir);
    if (cfg.synthetic.scale_steps.empty()) return trace;
    return std::make_unique<ScaledSource>(std::move(trace), cfg.synthetic.scale_steps);
  }
  return std::make_unique<SyntheticSource>(cfg.synthetic_options());
}

SimulateConfig resolve(SimulateConfig cfg, const GradientSource& src) {
  cfg.validate();
  if (src.workers() > 0) {
    EXDYNA_CHECK_ARG(!cfg.workers || *cfg.workers == src.workers(), "--workers ", *cfg.workers,
                     " does not match the ", src.workers(), " workers of ", source_name(cfg),
                     "; expected ", src.workers(), " (or leave --workers out)");
    cfg.workers = src.workers();
  } else if (!cfg.workers) {
    cfg.workers = SimulateConfig::kDefaultWorkers;
  }
  if (src.iterations() > 0) {
    EXDYNA_CHECK_ARG(!cfg.iterations || *cfg.iterations <= src.iterations(), "--iterations ",
                     *cfg.iterations, " is more than the ", src.iterations(), " iterations of ",
                     source_name(cfg), "; expected 1..", src.iterations());
    if (!cfg.iterations) cfg.iterations = src.iterations();
  } else if (!cfg.iterations) {
    cfg.iterations = SimulateConfig::kDefaultIterations;
  }
  cfg.n_grad = src.n_g();
  cfg.sparse.n_g = src.n_g();
  cfg.sparse.world_size = *cfg.workers;
  cfg.sparse.rank = 0;
  cfg.sparse.validate();
  return cfg;
}

WorkerResult run_worker(const SimulateConfig& cfg, const sparsifiers::Registry& registry,
                        GradientSource& src, comm::Communicator& comm) {
  EXDYNA_CHECK_ARG(cfg.workers && cfg.iterations && cfg.n_grad,
                   "simulate: run_worker needs a resolved config");
  EXDYNA_CHECK_ARG(comm.size() == *cfg.workers, "simulate: the communicator has ", comm.size(),
                   " ranks, the run expects ", *cfg.workers, " workers");
  EXDYNA_CHECK_ARG(src.n_g() == *cfg.n_grad, "simulate: the source has n_g = ", src.n_g(),
                   ", the run expects ", *cfg.n_grad);
  comm.set_timeout(std::chrono::milliseconds(static_cast<std::int64_t>(cfg.timeout_s * 1000.0)));
  core::Stopwatch wall;

  sparsifiers::SparsifierConfig sc = cfg.sparse;
  sc.n_g = src.n_g();
  sc.world_size = comm.size();
  sc.rank = comm.rank();
  sparsifiers::ErrorFeedbackOptions efo;
  efo.measure_global_error = cfg.measure_global_error;
  sparsifiers::ErrorFeedback ef(registry.make(cfg.sparsifier, sc), sc.n_g, efo);

  WorkerResult res;
  const auto T = *cfg.iterations;
  res.steps.reserve(static_cast<std::size_t>(T));
  std::vector<float> grad(static_cast<std::size_t>(sc.n_g));
  double sums[3] = {0, 0, 0};  // select, non-comm, step
  for (std::int64_t t = 0; t < T; ++t) {
    src.fill(t, comm.rank(), grad);
    core::Stopwatch sw;
    const double cpu0 = thread_cpu_s();
    core::StepStats st;
    try {
      st = ef.step(grad, comm);
    } catch (const DataError& e) {
      throw DataError(detail::concat(source_name(cfg), ": ", e.what()));
    }
    st.times.cpu = thread_cpu_s() - cpu0;
    sums[2] += sw.elapsed();
    sums[0] += st.times.select;
    sums[1] += st.times.non_comm();
    res.steps.push_back(std::move(st));
  }
  // The only collective outside the steps: mean timings over every worker.
  comm.allreduce_sum(std::span<double>(sums, 3));
  const double denom = static_cast<double>(T) * comm.size();
  res.mean_select_s = sums[0] / denom;
  res.mean_non_comm_s = sums[1] / denom;
  res.mean_step_s = sums[2] / denom;
  res.wall_s = wall.elapsed();
  return res;
}

WorkerResult run_in_process(const SimulateConfig& cfg, const sparsifiers::Registry& registry,
                            GradientSource& src) {
  EXDYNA_CHECK_ARG(cfg.workers, "simulate: run_in_process needs a resolved config");
  WorkerResult rank0;
  comm::run_local(
      *cfg.workers,
      [&](comm::Communicator& c) {
        auto r = run_worker(cfg, registry, src, c);
        if (c.rank() == 0) rank0 = std::move(r);
      },
      std::chrono::milliseconds(static_cast<std::int64_t>(cfg.timeout_s * 1000.0)));
  return rank0;
}

Summary summarize(const SimulateConfig& cfg, const WorkerResult& result) {
  Summary s;
  const auto& steps = result.steps;
  s.iterations = static_cast<std::int64_t>(steps.size());
  // The target the sparsifier reports (dense reports 1), else the configured one.
  s.target_density =
      !steps.empty() && steps[0].target_density > 0 ? steps[0].target_density : cfg.sparse.density;
  s.k_target = !steps.empty() && steps[0].k_target > 0 ? steps[0].k_target : cfg.sparse.k();
  std::vector<double> ratio, ft, ge;
  core::ByteCounts bytes;
  double padded = 0;
  for (const auto& st : steps) {
    ratio.push_back(st.density / s.target_density);
    ft.push_back(st.f_t);
    if (!std::isnan(st.global_error)) ge.push_back(st.global_error);
    bytes += st.bytes;
    padded += static_cast<double>(st.padded_elements);
  }
  s.density_ratio = range_of(ratio);
  s.f_t = range_of(ft);
  s.global_error =
      ge.empty() ? Summary::Range{std::nan(""), std::nan(""), std::nan("")} : range_of(ge);
  if (!steps.empty()) {
    const auto n = static_cast<std::uint64_t>(steps.size());
    s.mean_bytes = static_cast<double>(bytes.total()) / static_cast<double>(n);
    s.mean_bytes_by_kind.allgather_counts = bytes.allgather_counts / n;
    s.mean_bytes_by_kind.allgather_indices = bytes.allgather_indices / n;
    s.mean_bytes_by_kind.allreduce = bytes.allreduce / n;
    s.mean_bytes_by_kind.broadcast = bytes.broadcast / n;
    s.mean_bytes_by_kind.padded_elements = bytes.padded_elements / n;
    s.mean_padded_elements = padded / static_cast<double>(n);
  }
  const auto within = [&](std::size_t t) { return std::fabs(ratio[t] - 1.0) <= 0.1; };
  // First iteration >= from within the band, and the first from which it stays until `to`.
  const auto first_and_settled = [&](std::size_t from, std::size_t to) {
    std::pair<std::int64_t, std::int64_t> r{-1, -1};
    for (std::size_t t = from; t < to && r.first < 0; ++t)
      if (within(t)) r.first = static_cast<std::int64_t>(t);
    for (std::size_t t = to; t > from && within(t - 1); --t)
      r.second = static_cast<std::int64_t>(t - 1);
    return r;
  };
  std::tie(s.first_within, s.settled_at) = first_and_settled(0, ratio.size());
  if (s.iterations > Summary::kWarmup) {
    const auto w = static_cast<std::size_t>(Summary::kWarmup);
    s.density_ratio_after_warmup = range_of(std::span<const double>(ratio).subspan(w)).mean;
    s.f_t_after_warmup = range_of(std::span<const double>(ft).subspan(w)).mean;
  } else {
    s.density_ratio_after_warmup = s.f_t_after_warmup = std::nan("");
  }
  {
    // Scale steps of either source (a trace replays them through ScaledSource).
    auto steps_sorted = cfg.synthetic.scale_steps;
    std::sort(steps_sorted.begin(), steps_sorted.end(),
              [](const ScaleStep& a, const ScaleStep& b) { return a.iteration < b.iteration; });
    for (std::size_t j = 0; j < steps_sorted.size(); ++j) {
      const auto& st = steps_sorted[j];
      if (st.iteration <= 0 || st.iteration >= s.iterations) continue;
      // Up to the next step (or the end of the run).
      std::int64_t end = s.iterations;
      if (j + 1 < steps_sorted.size())
        end = std::min(end, std::max(st.iteration, steps_sorted[j + 1].iteration));
      const auto [first, settled] =
          first_and_settled(static_cast<std::size_t>(st.iteration), static_cast<std::size_t>(end));
      s.recoveries.push_back({st.iteration, st.factor, first < 0 ? -1 : first - st.iteration,
                              settled < 0 ? -1 : settled - st.iteration});
    }
  }
  const std::int64_t nw = std::min<std::int64_t>(10, s.iterations);
  for (std::int64_t w = 0; w < nw; ++w) {
    Summary::Window win;
    win.begin = s.iterations * w / nw;
    win.end = s.iterations * (w + 1) / nw;
    const auto b = static_cast<std::size_t>(win.begin), e = static_cast<std::size_t>(win.end);
    win.density_ratio = range_of(std::span<const double>(ratio).subspan(b, e - b));
    win.mean_f_t = range_of(std::span<const double>(ft).subspan(b, e - b)).mean;
    s.windows.push_back(win);
  }
  s.mean_select_s = result.mean_select_s;
  s.mean_non_comm_s = result.mean_non_comm_s;
  s.mean_step_s = result.mean_step_s;
  s.wall_s = result.wall_s;
  return s;
}

void print_summary(std::ostream& os, const SimulateConfig& cfg, const GradientSource& src,
                   const Summary& s) {
  char line[256];
  auto out = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    os << line;
  };
  const std::string source = cfg.describe_source();
  os << "exdyna simulate: " << cfg.sparsifier << " on " << cfg.workers.value_or(0) << " workers, "
     << s.iterations << " iterations, n_g = " << src.n_g() << " from " << source << "\n";
  out("target density %.6g (k = %lld), gather %s\n\n", s.target_density,
      static_cast<long long>(s.k_target), comm::to_string(cfg.sparse.gather_mode));
  out("%-28s %12s %12s %12s\n", "", "mean", "min", "max");
  out("%-28s %12.4f %12.4f %12.4f\n", "actual density / target", s.density_ratio.mean,
      s.density_ratio.min, s.density_ratio.max);
  out("%-28s %12.4f %12.4f %12.4f\n", "f(t)", s.f_t.mean, s.f_t.min, s.f_t.max);
  out("%-28s %12.4g %12.4g %12.4g\n", "global error (Eq. 1)", s.global_error.mean,
      s.global_error.min, s.global_error.max);
  os << "\n";
  out("%-28s %12.4f ms\n", "selection time", s.mean_select_s * 1e3);
  out("%-28s %12.4f ms\n", "non-communication time", s.mean_non_comm_s * 1e3);
  out("%-28s %12.4f ms\n", "step time (with waits)", s.mean_step_s * 1e3);
  out("%-28s %12.0f (counts %llu, indices %llu, values %llu, broadcast %llu)\n",
      "bytes per iteration", s.mean_bytes,
      static_cast<unsigned long long>(s.mean_bytes_by_kind.allgather_counts),
      static_cast<unsigned long long>(s.mean_bytes_by_kind.allgather_indices),
      static_cast<unsigned long long>(s.mean_bytes_by_kind.allreduce),
      static_cast<unsigned long long>(s.mean_bytes_by_kind.broadcast));
  out("%-28s %12.1f\n", "padded elements", s.mean_padded_elements);
  if (s.first_within >= 0)
    out("%-28s %12lld\n", "first within +-10% at", static_cast<long long>(s.first_within));
  else
    out("%-28s %12s\n", "first within +-10% at", "never");
  if (s.settled_at >= 0)
    out("%-28s %12lld\n", "stays within +-10% from", static_cast<long long>(s.settled_at));
  else
    out("%-28s %12s\n", "stays within +-10% from", "never");
  for (const auto& r : s.recoveries) {
    char what[64];
    std::snprintf(what, sizeof what, "after x%g at %lld: back in", r.factor,
                  static_cast<long long>(r.iteration));
    out("%-28s %12lld iterations, stays from %lld\n", what, static_cast<long long>(r.first_within),
        static_cast<long long>(r.settled));
  }
  out("%-28s %12.4f\n", "density / target from it. 10", s.density_ratio_after_warmup);
  out("%-28s %12.4f\n", "f(t) from iteration 10", s.f_t_after_warmup);
  out("%-28s %12.2f s\n", "wall time", s.wall_s);
  os << "(times are per worker and iteration, means over workers; bytes are per worker)\n\n";
  out("%-16s %12s %12s %12s %12s\n", "iterations", "density/d", "min", "max", "f(t)");
  for (const auto& w : s.windows) {
    char span[40];
    std::snprintf(span, sizeof span, "%lld-%lld", static_cast<long long>(w.begin),
                  static_cast<long long>(w.end - 1));
    out("%-16s %12.4f %12.4f %12.4f %12.4f\n", span, w.density_ratio.mean, w.density_ratio.min,
        w.density_ratio.max, w.mean_f_t);
  }
}

std::string decisions_csv(std::span<const core::StepStats> steps, int workers) {
  std::string s = "iter,threshold,k_total,density,f_t";
  for (int i = 0; i < workers; ++i) s += ",k_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",alloc_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",blocks_p" + std::to_string(i);
  s += "\n";
  for (const auto& st : steps) {
    append_int(s, st.iteration);
    s += ',';
    append_double(s, st.threshold);
    s += ',';
    append_int(s, st.k_total);
    s += ',';
    append_double(s, st.density);
    s += ',';
    append_double(s, st.f_t);
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i) {
      s += ',';
      append_int(s, at_or<std::int64_t>(st.k_per_worker, i, 0));
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i) {
      s += ',';
      append_int(s, at_or<int>(st.alloc_per_worker, i, -1));
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i) {
      s += ',';
      append_int(s, at_or<std::int64_t>(st.blocks_per_partition, i, 0));
    }
    s += '\n';
  }
  return s;
}

std::string stats_csv(std::span<const core::StepStats> steps, int workers) {
  std::string s =
      "iter,world_size,n_g,k_target,target_density,threshold,k_total,k_unique,density,density_"
      "error,f_t,"
      "padded_elements,global_error,bytes_allgather_counts,bytes_allgather_indices,bytes_allreduce,"
      "bytes_broadcast,bytes_padded_elements,bytes_total,t_accumulate,t_select,t_allgather,t_"
      "allreduce,"
      "t_broadcast,t_update,t_other,t_non_comm,t_cpu";
  for (int i = 0; i < workers; ++i) s += ",k_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",alloc_w" + std::to_string(i);
  for (int i = 0; i < workers; ++i) s += ",blocks_p" + std::to_string(i);
  s += "\n";
  for (const auto& st : steps) {
    const std::int64_t ints1[] = {st.iteration, st.world_size, st.n_g, st.k_target};
    for (auto v : ints1) append_int(s, v), s += ',';
    append_double(s, st.target_density), s += ',';
    append_double(s, st.threshold), s += ',';
    append_int(s, st.k_total), s += ',';
    append_int(s, st.k_unique), s += ',';
    append_double(s, st.density), s += ',';
    append_double(s, st.density_error), s += ',';
    append_double(s, st.f_t), s += ',';
    append_int(s, st.padded_elements), s += ',';
    append_double(s, st.global_error);
    const std::uint64_t b[] = {st.bytes.allgather_counts, st.bytes.allgather_indices,
                               st.bytes.allreduce,        st.bytes.broadcast,
                               st.bytes.padded_elements,  st.bytes.total()};
    for (auto v : b) s += ',', s += std::to_string(v);
    const double tm[] = {st.times.accumulate, st.times.select,     st.times.allgather,
                         st.times.allreduce,  st.times.broadcast,  st.times.update,
                         st.times.other,      st.times.non_comm(), st.times.cpu};
    for (auto v : tm) s += ',', append_double(s, v);
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      s += ',', append_int(s, at_or<std::int64_t>(st.k_per_worker, i, 0));
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      s += ',', append_int(s, at_or<int>(st.alloc_per_worker, i, -1));
    for (std::size_t i = 0; i < static_cast<std::size_t>(workers); ++i)
      s += ',', append_int(s, at_or<std::int64_t>(st.blocks_per_partition, i, 0));
    s += '\n';
  }
  return s;
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string name = ".";  // hidden, beside the target so rename() stays within one file system
  name += path.filename().string();
  name += ".tmp-XXXXXX";
  std::string tmpl = (dir / name).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw Error(detail::concat("cannot write '", path.string(), "': creating a temporary file in '",
                               dir.string(), "' failed: ", std::strerror(errno)));
  const char* p = content.data();
  std::size_t left = content.size();
  int err = 0;
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  // mkstemp makes the file 0600; give it the usual permissions of an output file.
  if (!err && ::chmod(tmpl.c_str(), 0644) != 0) err = errno;
  if (!err && ::rename(tmpl.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmpl.c_str());
    throw Error(detail::concat("cannot write '", path.string(), "': ", std::strerror(err)));
  }
}

void report(std::ostream& os, const SimulateConfig& cfg, const GradientSource& src,
            const WorkerResult& result) {
  const int n = cfg.workers.value_or(0);
  if (!cfg.decisions_path.empty())
    write_file_atomic(cfg.decisions_path, decisions_csv(result.steps, n));
  if (!cfg.stats_path.empty()) write_file_atomic(cfg.stats_path, stats_csv(result.steps, n));
  print_summary(os, cfg, src, summarize(cfg, result));
  if (!cfg.decisions_path.empty()) os << "decisions: " << cfg.decisions_path.string() << "\n";
  if (!cfg.stats_path.empty()) os << "statistics: " << cfg.stats_path.string() << "\n";
}

int simulate(const SimulateConfig& config, const sparsifiers::Registry& registry,
             std::ostream& os) {
  config.validate();
  // Unknown names fail here, before the source is built; make() lists the known ones.
  const auto names = registry.names();
  if (std::find(names.begin(), names.end(), config.sparsifier) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw InvalidArgument(
        detail::concat("unknown sparsifier '", config.sparsifier, "'; expected one of: ", known));
  }
  auto src = make_source(config);
  const SimulateConfig cfg = resolve(config, *src);
  const WorkerResult result = run_in_process(cfg, registry, *src);
  report(os, cfg, *src, result);
  return 0;
}

}  // namespace exdyna::sim
