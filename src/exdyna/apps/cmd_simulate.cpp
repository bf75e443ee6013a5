#include "exdyna/apps/commands.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::apps {
void add_simulate_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand("simulate", "run in-process workers on a synthetic or recorded gradient stream");
  sub->callback([&action] { action = [] { throw Error("simulate: not built yet"); return 1; }; });
}
}  // namespace exdyna::apps
