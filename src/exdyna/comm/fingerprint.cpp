#include "exdyna/comm/fingerprint.hpp"

#include <map>

namespace exdyna::comm {

namespace {
// Field separator and name/value separator of the serialised form; neither occurs in the names
// and values we produce (numbers, identifiers, "k=v;k=v" lists are split before).
constexpr char kFieldSep = '\n';
constexpr char kNameSep = '\t';
}  // namespace

Fingerprint& Fingerprint::add(const std::string& name, const std::string& value) {
  if (value.find('=') == std::string::npos) {
    fields_.emplace_back(name, value);
    return *this;
  }
  // "a=1;b=2" or "topk;a=1;b=2": split into sub-fields; an item without '=' is the name's head.
  std::size_t start = 0;
  while (start <= value.size()) {
    auto end = value.find(';', start);
    if (end == std::string::npos) end = value.size();
    const std::string item = value.substr(start, end - start);
    if (!item.empty()) {
      const auto eq = item.find('=');
      if (eq == std::string::npos)
        fields_.emplace_back(name, item);
      else
        fields_.emplace_back(name + "." + item.substr(0, eq), item.substr(eq + 1));
    }
    start = end + 1;
  }
  return *this;
}

std::string Fingerprint::serialize() const {
  std::string s;
  for (const auto& [k, v] : fields_) {
    s += k;
    s += kNameSep;
    s += v;
    s += kFieldSep;
  }
  return s;
}

Fingerprint Fingerprint::parse(const std::string& s) {
  Fingerprint fp;
  std::size_t start = 0;
  while (start < s.size()) {
    auto end = s.find(kFieldSep, start);
    if (end == std::string::npos) end = s.size();
    const std::string line = s.substr(start, end - start);
    const auto tab = line.find(kNameSep);
    if (tab == std::string::npos)
      fp.fields_.emplace_back(line, "");
    else
      fp.fields_.emplace_back(line.substr(0, tab), line.substr(tab + 1));
    start = end + 1;
  }
  return fp;
}

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}
}  // namespace

void check_same_configuration(Communicator& comm, const Fingerprint& fp) {
  const std::string mine = fp.serialize();
  const auto n = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> len(n);
  const std::int64_t my_len = static_cast<std::int64_t>(mine.size());
  comm.allgather_counts(std::span<const std::int64_t>(&my_len, 1), len);
  std::vector<char> all;
  comm.allgather_list(std::span<const char>(mine.data(), mine.size()), len, GatherMode::kExact,
                      all);
  comm.reset_bytes();

  std::vector<Fingerprint> fps;
  std::size_t off = 0;
  for (std::size_t r = 0; r < n; ++r) {
    fps.push_back(
        Fingerprint::parse(std::string(all.data() + off, static_cast<std::size_t>(len[r]))));
    off += static_cast<std::size_t>(len[r]);
  }
  // Field names in first-seen order over all ranks; a field one rank lacks reads "(absent)".
  std::vector<std::string> names;
  std::vector<std::map<std::string, std::string>> by_rank(n);
  for (std::size_t r = 0; r < n; ++r)
    for (const auto& [k, v] : fps[r].fields()) {
      if (!by_rank[r].count(k)) {
        bool seen = false;
        for (const auto& x : names) seen = seen || x == k;
        if (!seen) names.push_back(k);
      }
      by_rank[r][k] = v;
    }
  std::string problems;
  for (const auto& name : names) {
    // Group ranks by value, in order of first appearance.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (std::size_t r = 0; r < n; ++r) {
      const auto it = by_rank[r].find(name);
      const std::string v = it == by_rank[r].end() ? "(absent)" : it->second;
      bool placed = false;
      for (auto& g : groups)
        if (g.first == v) {
          g.second.push_back(static_cast<int>(r));
          placed = true;
        }
      if (!placed) groups.push_back({v, {static_cast<int>(r)}});
    }
    if (groups.size() == 1) continue;
    std::string line = name + " is '" + groups[0].first + "' on " + rank_list(groups[0].second);
    for (std::size_t g = 1; g < groups.size(); ++g)
      line += (g + 1 == groups.size() ? " but '" : ", '") + groups[g].first + "' on " +
              rank_list(groups[g].second);
    problems += (problems.empty() ? "" : "; ") + line;
  }
  if (!problems.empty())
    throw InvalidArgument("configuration differs between ranks, refusing to start: " + problems);
}

}  // namespace exdyna::comm
