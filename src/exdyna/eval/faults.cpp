#include "exdyna/eval/faults.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "exdyna/core/error.hpp"
#include "exdyna/eval/hosts.hpp"
#include "exdyna/sim/shell.hpp"

namespace exdyna::eval {

namespace {

// One table per host namespace; its chain hooks the input path, ahead of everything else.
const std::string kTable = "exdyna_faults";

std::vector<std::string> nft(const std::string& ns, std::vector<std::string> args) {
  std::vector<std::string> a{"ip", "netns", "exec", ns, "nft"};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

void ensure_chain(const std::string& ns) {
  run_tool_checked(nft(ns, {"add", "table", "inet", kTable}));
  run_tool_checked(nft(ns, {"add", "chain", "inet", kTable, "in",
                            "{ type filter hook input priority -300 ; policy accept ; }"}));
}

// The sum of the packet counters of table `table` in host `ns` (0 when it does not exist).
long count_packets(const std::string& ns, const std::string& table) {
  // `nft list` prints "counter packets N bytes M" per rule; stdout is all we read.
  const std::string out = sim::run_capture("ip netns exec " + sim::shell_quote(ns) +
                                           " nft list table inet " + table + " 2>/dev/null");
  long total = 0;
  for (std::size_t at = out.find("packets "); at != std::string::npos;
       at = out.find("packets ", at + 8))
    total += std::strtol(out.c_str() + at + 8, nullptr, 10);
  return total;
}

}  // namespace

std::string faults_unavailable_reason() {
  const std::string probe = "exd" + std::to_string(::getpid()) + "-nftprobe";
  if (const auto r = run_tool({"ip", "netns", "add", probe}); r.rc != 0)
    return "cannot create network namespaces (`ip netns add` failed: " + r.err + ")";
  const auto r = run_tool(nft(probe, {"add", "table", "inet", kTable}));
  run_tool({"ip", "netns", "delete", probe});
  if (r.rc != 0)
    return "nftables cannot filter in a namespace here (`nft add table` exit " +
           std::to_string(r.rc) + ": " + r.err + "); install the nftables package";
  return {};
}

long dropped_packets(const std::string& ns) {
  return count_packets(ns, kTable);
}

void add_loss(const std::string& ns, double pct) {
  EXDYNA_CHECK_ARG(std::isfinite(pct) && pct > 0 && pct < 100, "loss ", pct,
                   " % is not valid; expected 0 < loss < 100");
  ensure_chain(ns);
  const long per_10k = std::lround(pct * 100);
  run_tool_checked(nft(ns, {"add", "rule", "inet", kTable, "in", "numgen", "random", "mod", "10000",
                            "<", std::to_string(per_10k), "counter", "drop"}));
}

long blackout(const std::string& ns, std::chrono::milliseconds length) {
  // A table of its own, so ending the blackout is one `delete table`, whatever else is installed.
  const std::string t = "exdyna_blackout";
  run_tool_checked(nft(ns, {"add", "table", "inet", t}));
  run_tool_checked(nft(ns, {"add", "chain", "inet", t, "in",
                            "{ type filter hook input priority -400 ; policy accept ; }"}));
  run_tool_checked(nft(ns, {"add", "rule", "inet", t, "in", "counter", "drop"}));
  std::this_thread::sleep_for(length);
  const long dropped = count_packets(ns, t);
  run_tool_checked(nft(ns, {"delete", "table", "inet", t}));
  return dropped;
}

void clear_faults(const std::string& ns) {
  run_tool(nft(ns, {"delete", "table", "inet", kTable}));
}

void cut_link(const std::string& ns) {
  run_tool_checked({"ip", "-n", ns, "link", "set", "eth0", "down"});
}

}  // namespace exdyna::eval
