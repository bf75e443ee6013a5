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

const std::string& Registry::description(const std::string& name) const {
  auto it = entries_.find(name);
  EXDYNA_CHECK_ARG(it != entries_.end(), "unknown sparsifier '", name, "'");
  return it->second.description;
}

std::unique_ptr<Sparsifier> Registry::make(const std::string& name,
                                           const SparsifierConfig& cfg) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::ostringstream known;
    for (const auto& [n, e] : entries_) known << (known.tellp() > 0 ? ", " : "") << n;
    throw InvalidArgument(
        detail::concat("unknown sparsifier '", name, "'; expected one of: ", known.str()));
  }
  cfg.validate();
  return it->second.factory(cfg);
}

Registry builtin_registry() {
  Registry r;
  register_builtin_sparsifiers(r);
  return r;
}

}  // namespace exdyna::sparsifiers
