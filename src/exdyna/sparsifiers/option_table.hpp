// The option table: every option that tunes a sparsifier, listed once, with its Python keyword,
// its command-line flag, the values it takes, the sparsifier it applies to, its help text and how
// it reads and writes a SparsifierConfig. The CLI's flags (apps/sparsifier_cli.cpp), the Python
// keywords (python/bindings.cpp), SparsifierConfig::fingerprint() and the docs' option list
// (`exdyna options --markdown`) all iterate it: adding an option is adding one entry.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "exdyna/sparsifiers/config.hpp"

namespace exdyna::sparsifiers {

// What a value must be; the Python binding checks a keyword's type from it before set().
enum class OptionKind {
  kInteger,  // a whole number
  kNumber,   // a real number
  kChoice,   // one of the words in `values`
  kCap,      // a word (auto, none) or a number
};
const char* to_string(OptionKind k);

struct OptionSpec {
  std::string_view key;   // Python keyword and fingerprint name, e.g. "min_blk"
  std::string_view flag;  // command-line flag(s), e.g. "--min-blk" or "--gather,--gather-mode"
  OptionKind kind;
  std::string_view values;      // the values it takes, as users read them: "an integer >= 1"
  std::string_view applies_to;  // registry name of the sparsifier it tunes; empty: every one
  std::string_view help;
  std::string_view default_text;  // shown as the default instead of get(SparsifierConfig{})
  // Parses text into config. A bad value throws InvalidArgument("TEXT is not valid; expected
  // ..."), naming no option: the CLI and Python prefix it with their own spelling.
  void (*set)(SparsifierConfig& config, std::string_view text);
  // The value in config as canonical text (fingerprints, defaults in --help and the docs).
  std::string (*get)(const SparsifierConfig& config);

  // The first of `flag`'s spellings.
  std::string_view primary_flag() const;
};

std::span<const OptionSpec> option_table();
// nullptr when no entry has that key, or that flag among its spellings.
const OptionSpec* find_option_by_key(std::string_view key);
const OptionSpec* find_option_by_flag(std::string_view flag);
// default_text, or the value of a default-constructed SparsifierConfig.
std::string default_text(const OptionSpec& o);
// The docs' option list: one Markdown table row per option.
std::string options_markdown();

}  // namespace exdyna::sparsifiers
