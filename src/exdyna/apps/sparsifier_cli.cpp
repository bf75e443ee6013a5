#include "exdyna/apps/sparsifier_cli.hpp"
#include "exdyna/apps/cli_checks.hpp"

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/option_table.hpp"
#include "exdyna/sparsifiers/registry.hpp"

namespace exdyna::apps {

namespace {

const char* type_name(sparsifiers::OptionKind k) {
  switch (k) {
    case sparsifiers::OptionKind::kInteger:
      return "INT";
    case sparsifiers::OptionKind::kNumber:
      return "FLOAT";
    default:
      return "TEXT";
  }
}

// Refuses a bad value while CLI11 parses, with the table's message (CLI11 prefixes the flag).
CLI::Validator table_check(const sparsifiers::OptionSpec& o) {
  return CLI::Validator(
      [&o](std::string& text) -> std::string {
        sparsifiers::SparsifierConfig scratch;
        try {
          o.set(scratch, text);
        } catch (const InvalidArgument& e) {
          return e.what();
        }
        return {};
      },
      std::string(o.values));
}

}  // namespace

void add_sparsifier_options(CLI::App* sub, SparsifierCli& s) {
  sub->add_option("--sparsifier", s.sparsifier,
                  "sparsifier: " + sparsifiers::builtin_registry().names_text())
      ->capture_default_str();
  sub->add_option("--density", s.config.density, "target density d in (0, 1]")
      ->check(positive_at_most(1))
      ->capture_default_str();
  add_tuning_options(sub, s);
}

void add_tuning_options(CLI::App* sub, SparsifierCli& s) {
  for (const auto& o : sparsifiers::option_table()) {
    const std::string applies =
        o.applies_to.empty() ? std::string() : detail::concat(o.applies_to, ": ");
    // std::map nodes do not move: CLI11 keeps the address of each string. Empty: not given (the
    // table refuses an empty value).
    sub->add_option(std::string(o.flag), s.typed[std::string(o.key)], applies + std::string(o.help))
        ->check(table_check(o))
        ->type_name(type_name(o.kind))
        ->default_str(sparsifiers::default_text(o));
  }
}

std::vector<GivenOption> given_tuning_options(const CLI::App& sub) {
  std::vector<GivenOption> out;
  for (const auto& o : sparsifiers::option_table()) {
    const CLI::Option* opt = sub.get_option_no_throw(std::string(o.primary_flag()));
    EXDYNA_CHECK(opt != nullptr, "sparsifier_cli: ", o.primary_flag(), " is not registered");
    if (opt->count() > 0)
      out.push_back(
          {std::string(o.primary_flag()), opt->as<std::string>(), std::string(o.applies_to)});
  }
  return out;
}

void apply(const SparsifierCli& s, std::string& name, sparsifiers::SparsifierConfig& config) {
  name = s.sparsifier;
  config = s.config;
  for (const auto& o : sparsifiers::option_table()) {
    const auto it = s.typed.find(std::string(o.key));
    if (it == s.typed.end() || it->second.empty()) continue;
    const std::string flag(o.primary_flag());
    parsed(flag.c_str(), [&] { o.set(config, it->second); });
  }
}

}  // namespace exdyna::apps
