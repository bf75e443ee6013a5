#include "exdyna/apps/commands.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::apps {
void add_bench_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("bench", "benchmarks (comm)");
  sub->callback([&action] { action = [] { throw Error("bench: not built yet"); return 1; }; });
}
}  // namespace exdyna::apps
