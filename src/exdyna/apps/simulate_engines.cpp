#include "exdyna/apps/simulate_engines.hpp"

#include <filesystem>
#include <sstream>

#include "exdyna/core/error.hpp"

namespace exdyna::apps {

namespace {

std::string str(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

int simulate_on_engine(const sim::SimulateConfig& config, EngineCli engine, std::ostream& os) {
  config.validate();
  const auto registry = sparsifiers::builtin_registry();
  registry.require(config.sparsifier);
  const bool launched = comm::in_launched_environment();
  auto src = sim::make_source(config);
  if (!launched) {
    // Deciding how many processes to start: the resolved count (a trace fixes it).
    engine.workers = *sim::resolve(config, *src).workers;
  } else if (!config.workers) {
    engine.workers = 1;  // the launcher's world size, taken from the communicator below
  } else {
    engine.workers = *config.workers;
  }
  engine.timeout_s = config.timeout_s;
  return run_on_engine(engine, [&](comm::Communicator& c) {
    sim::SimulateConfig mine = config;
    mine.workers = c.size();
    const sim::SimulateConfig cfg = sim::resolve(mine, *src);

    auto fp = base_fingerprint(c);
    fp.add("sparsifier", cfg.sparsifier);
    fp.add("config", cfg.sparse.fingerprint());  // resolve() bound n_g and the world size
    fp.add("iterations", std::to_string(*cfg.iterations));
    fp.add("trace", cfg.trace_dir.string());
    if (cfg.trace_dir.empty()) {
      fp.add("seed", std::to_string(cfg.seed));
      fp.add("synthetic", cfg.synthetic_options().describe());
    } else {
      fp.add("source", cfg.describe_source());  // the trace's scale steps
    }
    fp.add("global_error", cfg.measure_global_error ? "1" : "0");
    fp.add("resources", cfg.measure_resources ? "1" : "0");  // sizes the final all-reduce
    fp.add("timeout_s", str(cfg.timeout_s));
    comm::check_same_configuration(c, fp);

    auto result = sim::run_worker(cfg, registry, *src, c);
    // A --stats path with {rank} is written by every rank, with its own times: the slowest rank
    // of an iteration (e.g. CLT-k's leader) sets the pace (exdyna compare reads them all).
    const std::string stats = cfg.stats_path.string();
    const auto at = stats.find("{rank}");
    if (at != std::string::npos) {
      const auto mine =
          std::filesystem::path(std::string(stats).replace(at, 6, std::to_string(c.rank())));
      if (c.rank() == 0) {
        auto cfg0 = cfg;
        cfg0.stats_path = mine;
        sim::report(os, cfg0, *src, result);
      } else {
        sim::write_file_atomic(mine, sim::stats_csv(result.steps, c.size()));
      }
    } else if (c.rank() == 0) {
      sim::report(os, cfg, *src, result);
    }
  });
}

}  // namespace exdyna::apps
