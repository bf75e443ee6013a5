// The option table (sparsifiers/option_table.hpp) is what the CLI, Python, the fingerprint and the
// docs read: every entry must be spelt consistently, refuse bad text naming it, and reach the
// configuration and its fingerprint.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "exdyna/core/error.hpp"
#include "exdyna/sparsifiers/option_table.hpp"
#include "exdyna/sparsifiers/registry.hpp"

namespace exdyna::sparsifiers {
namespace {

// A text set() accepts whose value differs from the default's: a choice's other word, else the
// first candidate that the option takes.
std::string other_value(const OptionSpec& o) {
  const std::string def = o.get(SparsifierConfig{});
  std::vector<std::string> candidates = {"2", "3", "1.5", "0.5", "7", "none", "auto"};
  if (o.kind == OptionKind::kChoice) {
    candidates.clear();
    std::string_view rest = o.values;
    while (!rest.empty()) {
      const auto bar = rest.find(" | ");
      candidates.emplace_back(rest.substr(0, bar));
      rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 3);
    }
  }
  for (const auto& c : candidates) {
    SparsifierConfig cfg;
    try {
      o.set(cfg, c);
    } catch (const InvalidArgument&) {
      continue;
    }
    if (o.get(cfg) != def) return c;
  }
  return {};
}

TEST(OptionTable, KeysAndFlagsAreOneSpelling) {
  std::set<std::string> keys, flags;
  for (const auto& o : option_table()) {
    std::string flag = "--" + std::string(o.key);
    for (auto& ch : flag)
      if (ch == '_') ch = '-';
    EXPECT_EQ(o.primary_flag(), flag) << o.key;
    EXPECT_TRUE(keys.insert(std::string(o.key)).second) << "duplicate key " << o.key;
    EXPECT_TRUE(flags.insert(flag).second) << "duplicate flag " << flag;
    EXPECT_EQ(find_option_by_key(o.key), &o);
    EXPECT_EQ(find_option_by_flag(o.primary_flag()), &o);
    EXPECT_FALSE(o.help.empty()) << o.key;
  }
  EXPECT_EQ(find_option_by_flag("--gather-mode"), find_option_by_key("gather"));
  EXPECT_EQ(find_option_by_key("nonesuch"), nullptr);
}

TEST(OptionTable, AppliesToARegisteredSparsifier) {
  const auto names = builtin_registry().names_text();
  for (const auto& o : option_table())
    if (!o.applies_to.empty())
      EXPECT_NE(names.find(std::string(o.applies_to)), std::string::npos) << o.key;
}

TEST(OptionTable, BadTextIsRefusedNamingIt) {
  for (const auto& o : option_table()) {
    SparsifierConfig cfg;
    for (const char* bad : {"", "x7", "1e999"}) {
      try {
        o.set(cfg, bad);
        ADD_FAILURE() << o.key << " took '" << bad << "'";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      }
    }
  }
}

TEST(OptionTable, EveryOptionReachesTheConfigAndItsFingerprint) {
  const SparsifierConfig def;
  for (const auto& o : option_table()) {
    EXPECT_NE(def.fingerprint().find(";" + std::string(o.key) + "="), std::string::npos) << o.key;
    const std::string text = other_value(o);
    ASSERT_FALSE(text.empty()) << o.key << ": no value other than the default was taken";
    SparsifierConfig cfg;
    o.set(cfg, text);
    EXPECT_NE(cfg.fingerprint(), def.fingerprint()) << o.key << "=" << text;
    // What get() shows, set() reads back to the same value.
    SparsifierConfig again;
    o.set(again, o.get(cfg));
    EXPECT_EQ(again.fingerprint(), cfg.fingerprint()) << o.key;
  }
}

TEST(OptionTable, OneDefaultTheExactControllerWithTheAutomaticCap) {
  SparsifierConfig cfg;
  EXPECT_EQ(find_option_by_key("controller")->get(cfg), "exact");
  EXPECT_EQ(find_option_by_key("balance")->get(cfg), "exact");
  EXPECT_EQ(find_option_by_key("worker_cap")->get(cfg), "auto");
  // The paper's controller takes no cap unless one is given, which it then refuses.
  find_option_by_key("controller")->set(cfg, "paper");
  EXPECT_EQ(find_option_by_key("worker_cap")->get(cfg), "0");
  EXPECT_NO_THROW(cfg.exdyna.validate(4));
  find_option_by_key("worker_cap")->set(cfg, "auto");
  EXPECT_THROW(cfg.exdyna.validate(4), InvalidArgument);
}

TEST(OptionTable, MarkdownHasARowPerOption) {
  const std::string md = options_markdown();
  for (const auto& o : option_table())
    EXPECT_NE(md.find("| `" + std::string(o.key) + "` | `" + std::string(o.primary_flag()) + "` |"),
              std::string::npos)
        << o.key;
}

}  // namespace
}  // namespace exdyna::sparsifiers
