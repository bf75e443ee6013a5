// Sparsifiers by name. Filled by an explicit register_builtin_sparsifiers() call rather than by
// static initialisers that a linker may drop.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

class Registry {
 public:
  using Factory = std::function<std::unique_ptr<Sparsifier>(const SparsifierConfig&)>;
  void add(const std::string& name, const std::string& description, Factory f);
  // The one place an unknown name is refused: throws InvalidArgument naming it and listing the
  // known ones.
  void require(const std::string& name) const;
  // Requires the name, then builds; the sparsifier's constructor validates cfg (once).
  std::unique_ptr<Sparsifier> make(const std::string& name, const SparsifierConfig& cfg) const;
  std::vector<std::string> names() const;
  // The names as a list for messages and help: "cltk, dense, ...".
  std::string names_text() const;
  const std::string& description(const std::string& name) const;

 private:
  struct Entry {
    std::string description;
    Factory factory;
  };
  std::map<std::string, Entry> entries_;
};

// exdyna, topk, cltk, hard-threshold, sidco, randomk, dense.
void register_builtin_sparsifiers(Registry& r);
// A registry with the built-ins.
Registry builtin_registry();

}  // namespace exdyna::sparsifiers
