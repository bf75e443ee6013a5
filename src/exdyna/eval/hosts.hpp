// Emulated hosts for `exdyna compare`: W network namespaces, each with one veth link into a bridge
// (the bridge lives in a namespace of its own), one IPv4 address per host, and `tc` shaping on both
// ends of every host's link (rate, and with sch_netem a delay and a loss rate), so that ranks
// started inside the hosts talk real TCP over links of a chosen speed.
//
// Every name carries a per-run prefix `exd<pid>-`, so two runs never collide and a set whose
// process is gone (killed with SIGKILL) can be recognised and removed by the next run
// (remove_stale_sets). A HostSet removes its namespaces in its destructor (normal exit and
// exceptions) and, while it lives, on SIGINT, SIGTERM and SIGHUP: the handlers delete the
// namespaces with fork/exec only (async-signal-safe), then re-raise the signal with its default
// action. `ip` and `tc` are run through fork/exec with an argv, never through a shell.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace exdyna::eval {

// Link parameters of every host, parsed from the command line.
struct LinkShape {
  std::uint64_t rate_bps = 1'000'000'000;  // bits per second
  double delay_us = 50;                    // one-way delay added on each host's egress
  double loss_pct = 0;                     // packet loss on each host's egress, percent
};

// "1gbit", "10gbit", "100mbit", "500kbit", "1000000bit" (tc's units, decimal). `option` names the
// option in the error (e.g. "--bandwidth"). Throws InvalidArgument naming the value.
std::uint64_t parse_rate(const std::string& s, const std::string& option);
// "50us", "1ms", "0" (microseconds when unitless). Range [0, 1 s].
double parse_delay_us(const std::string& s, const std::string& option);
// "0.1" or "0.1%": percent in [0, 100).
double parse_loss_pct(const std::string& s, const std::string& option);
// 1000000000 -> "1gbit", 100000000 -> "100mbit" (the names used in directory names and tables).
std::string rate_name(std::uint64_t bps);

// Result of one `ip`/`tc` invocation.
struct ToolResult {
  int rc = 0;  // exit status, 128 + signal, or 127 when it could not be started
  std::string err;
};
// Runs argv (argv[0] looked up in PATH, /usr/sbin and /sbin) and collects its standard error.
ToolResult run_tool(const std::vector<std::string>& argv);
// The same, throwing exdyna::Error with the command and its standard error on a non-zero exit.
void run_tool_checked(const std::vector<std::string>& argv);

// Empty when this process can create network namespaces, else one line saying why not.
std::string netns_unavailable_reason();

// Deletes every namespace named `exd<pid>-...` whose pid is no longer alive. Returns how many.
int remove_stale_sets();

// The names of the namespaces of the set created by process `pid` (`exd<pid>-*`), as listed now.
std::vector<std::string> namespaces_of(int pid);

class HostSet {
 public:
  // Creates `workers` hosts (1..250). Removes stale sets first. Throws Error naming the failing
  // command (and what it printed) and leaves nothing behind.
  HostSet(int workers, const LinkShape& link);
  ~HostSet();
  HostSet(const HostSet&) = delete;
  HostSet& operator=(const HostSet&) = delete;

  int size() const { return static_cast<int>(hosts_.size()); }
  const std::string& prefix() const { return prefix_; }
  const std::string& ns(int rank) const;  // host rank's namespace name
  std::string address(int rank) const;    // its IPv4 address (no mask)
  // `ip netns exec <ns>`: prepend to a command's argv to run it inside host `rank`.
  std::vector<std::string> exec_prefix(int rank) const;
  const LinkShape& link() const { return link_; }
  // False when sch_netem is missing: then the links are shaped by tbf only (rate, no delay, no
  // loss) and the delay is not emulated.
  bool netem() const { return netem_; }
  // The delay actually applied (0 without netem).
  double applied_delay_us() const { return netem_ ? link_.delay_us : 0.0; }

  // Deletes the namespaces now (idempotent); the destructor calls it.
  void remove() noexcept;

 private:
  void build();
  void shape(const std::string& ns, const std::string& dev);

  std::string prefix_;  // exd<pid>-s<serial>-
  std::string bridge_ns_;
  std::vector<std::string> hosts_;
  int subnet_ = 0;  // third octet of 10.213.<subnet>.0/24
  LinkShape link_;
  bool netem_ = false;
  bool removed_ = false;
};

}  // namespace exdyna::eval
