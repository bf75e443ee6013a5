// Subcommands of the `exdyna` tool. Each add_*_command registers its options on `app` and, when
// its subcommand is chosen, stores the action to run in `action` (called after parsing; its
// return value is the process exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace exdyna::apps {

using Action = std::function<int()>;

void add_simulate_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);
// `exdyna bench select` (cmd_bench_select.cpp), under `bench`.
void add_bench_select_command(CLI::App& bench, Action& action);
void add_compare_command(CLI::App& app, Action& action);
// `exdyna options` (cmd_options.cpp): the option table.
void add_options_command(CLI::App& app, Action& action);
#ifdef EXDYNA_HAVE_TORCH
void add_train_command(CLI::App& app, Action& action);
#endif

}  // namespace exdyna::apps
