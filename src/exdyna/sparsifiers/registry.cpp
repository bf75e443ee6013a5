#include "exdyna/sparsifiers/registry.hpp"

#include <sstream>

namespace exdyna::sparsifiers {

void Registry::add(const std::string& name, const std::string& description, Factory f) {
  EXDYNA_CHECK_ARG(!entries_.count(name), "sparsifier '", name, "' is registered twice");
  entries_[name] = Entry{description, std::move(f)};
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, e] : entries_) out.push_back(n);
  return out;
}

std::string Registry::names_text() const {
  std::ostringstream known;
  for (const auto& [n, e] : entries_) known << (known.tellp() > 0 ? ", " : "") << n;
  return known.str();
}

void Registry::require(const std::string& name) const {
  if (entries_.count(name)) return;
  throw InvalidArgument(
      detail::concat("unknown sparsifier '", name, "'; expected one of: ", names_text()));
}

const std::string& Registry::description(const std::string& name) const {
  require(name);
  return entries_.at(name).description;
}

std::unique_ptr<Sparsifier> Registry::make(const std::string& name,
                                           const SparsifierConfig& cfg) const {
  require(name);
  return entries_.at(name).factory(cfg);
}

Registry builtin_registry() {
  Registry r;
  register_builtin_sparsifiers(r);
  return r;
}

}  // namespace exdyna::sparsifiers
