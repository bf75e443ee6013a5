// Sparsifier options shared by every command that runs one (simulate, train, compare): the same
// flag means the same thing everywhere. add_sparsifier_options registers them; apply() turns what
// was parsed into the sparsifier's name and a SparsifierConfig (n_g, world size and rank are bound
// later, per worker: sparsifiers/factory.hpp).
//   --sparsifier, --density, --gather (alias --gather-mode), --values, --hard-threshold,
//   --sidco-stages, --randomk-seed, --dgc-sample, --oktopk-period, --oktopk-repartition,
//   ExDyna: --blocks, --min-blk, --initial-threshold, --controller, --balance, --worker-cap
// All but the first two tune a sparsifier without choosing it: `exdyna compare`, whose labels
// choose the sparsifier and whose --density is an axis of the matrix, takes only those
// (add_tuning_options) and forwards what the user gave to the cells they apply to.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "exdyna/sparsifiers/config.hpp"

namespace exdyna::apps {

// What differs between commands: train runs the exact controller and balance by default.
struct SparsifierDefaults {
  std::string controller = "paper";
  std::string balance = "paper";
  // Empty: auto with the exact controller, none with the others.
  std::string worker_cap = "none";
};

struct SparsifierCli {
  std::string sparsifier = "exdyna";
  // The numeric options, bound as parsed: density, ExDyna's n_b, min_blk and first threshold,
  // the hard threshold, SIDCo's stages.
  sparsifiers::SparsifierConfig config;
  // The named choices, parsed by apply().
  std::string gather = "padded", values = "fp32", controller, balance, worker_cap;
};

void add_sparsifier_options(CLI::App* sub, SparsifierCli& s, const SparsifierDefaults& d = {});

// The options above less --sparsifier and --density.
void add_tuning_options(CLI::App* sub, SparsifierCli& s, const SparsifierDefaults& d = {});

// A tuning option given on sub's command line, as `exdyna simulate` takes it.
struct GivenOption {
  std::string name;        // the primary spelling: --gather also for --gather-mode
  std::string value;       // as typed
  std::string applies_to;  // the registry sparsifier it tunes; empty: every sparsifier
};

// The tuning options given on sub's command line (after parsing), in --help's order.
std::vector<GivenOption> given_tuning_options(const CLI::App& sub);

// Sets name and config (all but n_g, world size and rank) from s. Throws InvalidArgument naming
// the option and the value when a choice is not one of the known ones.
void apply(const SparsifierCli& s, std::string& name, sparsifiers::SparsifierConfig& config);

}  // namespace exdyna::apps
