// The `exdyna` command: train, simulate, bench, compare.
#include <exception>
#include <iostream>

#include "exdyna/apps/commands.hpp"
#include "exdyna/core/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "exdyna: communication-efficient data-parallel training by gradient sparsification (ExDyna)"};
  app.set_version_flag("--version", std::string("exdyna ") + EXDYNA_VERSION);
  app.require_subcommand(1);
  exdyna::apps::Action action;
  exdyna::apps::add_simulate_command(app, action);
  exdyna::apps::add_bench_command(app, action);
  exdyna::apps::add_compare_command(app, action);
  exdyna::apps::add_options_command(app, action);
#ifdef EXDYNA_HAVE_TORCH
  exdyna::apps::add_train_command(app, action);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every refused option or value exits 2, like any bad input.
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return action ? action() : 0;
  } catch (const exdyna::Error& e) {
    std::cerr << "exdyna: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "exdyna: internal error: " << e.what() << "\n";
    return 3;
  }
}
