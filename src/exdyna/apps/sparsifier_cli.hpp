// Sparsifier options shared by every command that runs one (simulate, train, compare): the same
// flag means the same thing everywhere. add_sparsifier_options registers --sparsifier, --density
// and one flag per entry of the option table (sparsifiers/option_table.hpp); apply() turns what was
// parsed into the sparsifier's name and a SparsifierConfig (n_g, world size and rank are bound
// later, per worker: sparsifiers/factory.hpp).
// The table's options tune a sparsifier without choosing it: `exdyna compare`, whose labels choose
// the sparsifier and whose --density is an axis of the matrix, takes only those
// (add_tuning_options) and forwards what the user gave to the cells they apply to.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "exdyna/sparsifiers/config.hpp"

namespace exdyna::apps {

struct SparsifierCli {
  std::string sparsifier = "exdyna";
  // What the options start from: density is bound to --density, the rest set by apply().
  sparsifiers::SparsifierConfig config;
  // The option table's values as typed, by key (empty: not given).
  std::map<std::string, std::string> typed;
};

void add_sparsifier_options(CLI::App* sub, SparsifierCli& s);

// The options above less --sparsifier and --density.
void add_tuning_options(CLI::App* sub, SparsifierCli& s);

// A tuning option given on sub's command line, as `exdyna simulate` takes it.
struct GivenOption {
  std::string name;        // the primary spelling: --gather also for --gather-mode
  std::string value;       // as typed
  std::string applies_to;  // the registry sparsifier it tunes; empty: every sparsifier
};

// The tuning options given on sub's command line (after parsing), in the table's order.
std::vector<GivenOption> given_tuning_options(const CLI::App& sub);

// Sets name and config (all but n_g, world size and rank) from s. Throws InvalidArgument naming
// the option and the value when a value is not valid.
void apply(const SparsifierCli& s, std::string& name, sparsifiers::SparsifierConfig& config);

}  // namespace exdyna::apps
