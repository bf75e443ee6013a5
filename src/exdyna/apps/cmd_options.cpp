// `exdyna options`: the sparsifier options of the option table (sparsifiers/option_table.hpp), as
// simulate, train and compare take them and as exdyna.Sparsifier and exdyna.ddp.State take them
// in Python spelling. `--markdown` prints the table that docs/sparsifiers.md holds.
#include <iostream>
#include <memory>

#include "exdyna/apps/commands.hpp"
#include "exdyna/sparsifiers/option_table.hpp"

namespace exdyna::apps {

namespace {

void print_list() {
  for (const auto& o : sparsifiers::option_table()) {
    std::cout << o.primary_flag() << " (Python " << o.key << "): " << o.values
              << "; default: " << sparsifiers::default_text(o)
              << "; applies to: " << (o.applies_to.empty() ? "all" : o.applies_to) << "\n    "
              << o.help << "\n";
  }
}

}  // namespace

void add_options_command(CLI::App& app, Action& action) {
  auto* sub = app.add_subcommand(
      "options", "list the sparsifier options (the flags of simulate, train and compare)");
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--markdown", *markdown, "print them as the Markdown table of the docs");
  sub->callback([&action, markdown] {
    action = [markdown] {
      if (*markdown)
        std::cout << sparsifiers::options_markdown();
      else
        print_list();
      return 0;
    };
  });
}

}  // namespace exdyna::apps
