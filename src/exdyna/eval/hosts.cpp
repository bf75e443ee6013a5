#include "exdyna/eval/hosts.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "exdyna/core/error.hpp"

namespace exdyna::eval {

namespace {

// ---- parsing ---------------------------------------------------------------------------------

// Splits "12.5gbit" into 12.5 and "gbit"; pos == 0 when there is no leading number.
std::pair<double, std::string> number_and_unit(const std::string& s, std::size_t& pos) {
  double v = 0;
  pos = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  return {v, pos > 0 ? s.substr(pos) : s};
}

// ---- tools -----------------------------------------------------------------------------------

std::string find_tool(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string p = std::string(dir) + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return name;
}

// ---- signal-safe clean-up --------------------------------------------------------------------
//
// The namespaces of every live HostSet, in fixed storage the handler can read without allocating.
constexpr std::size_t kSlots = 2048;
constexpr std::size_t kNameLen = 64;
struct Slot {
  std::atomic<bool> used{false};
  char name[kNameLen] = {};
};
std::array<Slot, kSlots> g_slots;
char g_ip_path[256] = "/usr/sbin/ip";
std::mutex g_slot_mutex;
int g_live_sets = 0;
struct sigaction g_old_actions[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void delete_ns_signal_safe(const char* name) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
    char a0[] = "ip", a1[] = "netns", a2[] = "delete";
    char* argv[] = {a0, a1, a2, const_cast<char*>(name), nullptr};
    ::execv(g_ip_path, argv);
    ::_exit(127);
  }
  if (pid > 0) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
  }
}

extern "C" void cleanup_and_reraise(int sig) {
  for (auto& s : g_slots)
    if (s.used.load()) {
      delete_ns_signal_safe(s.name);
      s.used.store(false);
    }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void register_names(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(g_slot_mutex);
  std::snprintf(g_ip_path, sizeof(g_ip_path), "%s", find_tool("ip").c_str());
  for (const auto& n : names) {
    EXDYNA_CHECK(n.size() < kNameLen, "hosts: namespace name too long: ", n);
    bool placed = false;
    for (auto& s : g_slots) {
      if (s.used.load()) continue;
      std::snprintf(s.name, kNameLen, "%s", n.c_str());
      s.used.store(true);
      placed = true;
      break;
    }
    EXDYNA_CHECK(placed, "hosts: more than ", kSlots, " namespaces at once");
  }
  if (g_live_sets++ == 0) {
    struct sigaction sa {};
    sa.sa_handler = cleanup_and_reraise;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &g_old_actions[i]);
  }
}

void unregister_names(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(g_slot_mutex);
  for (const auto& n : names)
    for (auto& s : g_slots)
      if (s.used.load() && n == s.name) s.used.store(false);
  if (--g_live_sets == 0)
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_old_actions[i], nullptr);
}

std::atomic<int> g_serial{0};

bool pid_alive(int pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

std::vector<std::string> list_namespaces() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
    out.push_back(e.path().filename().string());
  return out;
}

// The pid in "exd<pid>-...", or -1.
int owner_pid(const std::string& ns) {
  if (ns.rfind("exd", 0) != 0) return -1;
  std::size_t i = 3;
  int pid = 0;
  while (i < ns.size() && ns[i] >= '0' && ns[i] <= '9' && pid < 100'000'000)
    pid = pid * 10 + (ns[i++] - '0');
  return i > 3 && i < ns.size() && ns[i] == '-' ? pid : -1;
}

}  // namespace

std::uint64_t parse_rate(const std::string& s, const std::string& option) {
  std::size_t pos = 0;
  const auto [v, unit] = number_and_unit(s, pos);
  double mul = 0;
  if (pos > 0) {
    if (unit == "bit")
      mul = 1;
    else if (unit == "kbit")
      mul = 1e3;
    else if (unit == "mbit")
      mul = 1e6;
    else if (unit == "gbit")
      mul = 1e9;
  }
  EXDYNA_CHECK_ARG(mul > 0, option, " '", s,
                   "' is not a rate; expected a number with bit, kbit, mbit or gbit, e.g. 1gbit");
  const double bps = v * mul;
  EXDYNA_CHECK_ARG(std::isfinite(bps) && bps >= 1e5 && bps <= 4e11, option, " '", s,
                   "' is out of range; expected 100kbit .. 400gbit");
  return static_cast<std::uint64_t>(std::llround(bps));
}

double parse_delay_us(const std::string& s, const std::string& option) {
  std::size_t pos = 0;
  const auto [v, unit] = number_and_unit(s, pos);
  double mul = -1;
  if (pos > 0) {
    if (unit.empty() || unit == "us")
      mul = 1;
    else if (unit == "ms")
      mul = 1e3;
    else if (unit == "s")
      mul = 1e6;
  }
  EXDYNA_CHECK_ARG(mul > 0, option, " '", s, "' is not a delay; expected e.g. 50us, 1ms or 0");
  const double us = v * mul;
  EXDYNA_CHECK_ARG(std::isfinite(us) && us >= 0 && us <= 1e6, option, " '", s,
                   "' is out of range; expected 0 .. 1s");
  return us;
}

double parse_loss_pct(const std::string& s, const std::string& option) {
  std::size_t pos = 0;
  const auto [v, unit] = number_and_unit(s, pos);
  EXDYNA_CHECK_ARG(
      pos > 0 && (unit.empty() || unit == "%") && std::isfinite(v) && v >= 0 && v < 100, option,
      " '", s, "' is not valid; expected a percentage in [0, 100), e.g. 0.1%");
  return v;
}

std::string rate_name(std::uint64_t bps) {
  auto exact = [&](std::uint64_t unit) { return bps % unit == 0; };
  if (bps >= 1'000'000'000 && exact(1'000'000'000))
    return std::to_string(bps / 1'000'000'000) + "gbit";
  if (bps >= 1'000'000 && exact(1'000'000)) return std::to_string(bps / 1'000'000) + "mbit";
  if (bps >= 1'000 && exact(1'000)) return std::to_string(bps / 1'000) + "kbit";
  return std::to_string(bps) + "bit";
}

ToolResult run_tool(const std::vector<std::string>& argv) {
  EXDYNA_CHECK(!argv.empty(), "run_tool: empty argv");
  int err_p[2];
  EXDYNA_CHECK(::pipe2(err_p, O_CLOEXEC) == 0, "run_tool: pipe failed: ", std::strerror(errno));
  const std::string path = find_tool(argv[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(err_p[1], STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO), ::dup2(devnull, STDOUT_FILENO);
    ::execv(path.c_str(), args.data());
    std::fprintf(stderr, "cannot start %s: %s\n", path.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(err_p[1]);
  ToolResult r;
  if (pid < 0) {
    ::close(err_p[0]);
    r.rc = 127;
    r.err = std::string("fork failed: ") + std::strerror(errno);
    return r;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(err_p[0], buf, sizeof(buf));
    if (n > 0)
      r.err.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(err_p[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  while (!r.err.empty() && (r.err.back() == '\n' || r.err.back() == ' ')) r.err.pop_back();
  return r;
}

void run_tool_checked(const std::vector<std::string>& argv) {
  const auto r = run_tool(argv);
  if (r.rc == 0) return;
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  throw Error(detail::concat("`", cmd, "` failed (exit ", r.rc, "): ", r.err));
}

std::string netns_unavailable_reason() {
  const std::string probe = "exd" + std::to_string(::getpid()) + "-probe";
  const auto r = run_tool({"ip", "netns", "add", probe});
  if (r.rc != 0)
    return "cannot create network namespaces (`ip netns add` failed: " + r.err +
           "); emulated hosts need root or CAP_NET_ADMIN";
  run_tool({"ip", "netns", "delete", probe});
  return {};
}

std::vector<std::string> namespaces_of(int pid) {
  std::vector<std::string> out;
  for (const auto& n : list_namespaces())
    if (owner_pid(n) == pid) out.push_back(n);
  return out;
}

int remove_stale_sets() {
  int removed = 0;
  for (const auto& n : list_namespaces()) {
    const int pid = owner_pid(n);
    if (pid <= 0 || pid == ::getpid() || pid_alive(pid)) continue;
    if (run_tool({"ip", "netns", "delete", n}).rc == 0) ++removed;
  }
  return removed;
}

HostSet::HostSet(int workers, const LinkShape& link) : link_(link) {
  EXDYNA_CHECK_ARG(workers >= 1 && workers <= 250, "hosts: ", workers,
                   " hosts is not valid; expected 1 .. 250");
  remove_stale_sets();
  const int pid = static_cast<int>(::getpid());
  prefix_ = "exd" + std::to_string(pid) + "-s" + std::to_string(g_serial++) + "-";
  subnet_ = pid % 256;
  bridge_ns_ = prefix_ + "br";
  for (int r = 0; r < workers; ++r) hosts_.push_back(prefix_ + "h" + std::to_string(r));
  std::vector<std::string> all = hosts_;
  all.push_back(bridge_ns_);
  register_names(all);
  try {
    build();
  } catch (...) {
    remove();
    throw;
  }
}

HostSet::~HostSet() {
  remove();
}

const std::string& HostSet::ns(int rank) const {
  EXDYNA_CHECK_ARG(rank >= 0 && rank < size(), "hosts: rank ", rank, " out of range");
  return hosts_[static_cast<std::size_t>(rank)];
}

std::string HostSet::address(int rank) const {
  EXDYNA_CHECK_ARG(rank >= 0 && rank < size(), "hosts: rank ", rank, " out of range");
  return "10.213." + std::to_string(subnet_) + "." + std::to_string(rank + 1);
}

std::vector<std::string> HostSet::exec_prefix(int rank) const {
  return {find_tool("ip"), "netns", "exec", ns(rank)};
}

void HostSet::build() {
  const std::string& br = bridge_ns_;
  run_tool_checked({"ip", "netns", "add", br});
  run_tool_checked({"ip", "-n", br, "link", "set", "lo", "up"});
  run_tool_checked({"ip", "-n", br, "link", "add", "br0", "type", "bridge"});
  run_tool_checked({"ip", "-n", br, "link", "set", "br0", "up"});
  // Probe netem once, on the bridge's own loopback (it has no traffic).
  netem_ =
      run_tool({"tc", "-n", br, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us"}).rc ==
      0;
  EXDYNA_CHECK_ARG(netem_ || link_.loss_pct == 0, "--loss ", link_.loss_pct,
                   "% needs the sch_netem queueing discipline, which this kernel lacks");
  for (int r = 0; r < size(); ++r) {
    const std::string& h = hosts_[static_cast<std::size_t>(r)];
    const std::string port = "p" + std::to_string(r);
    run_tool_checked({"ip", "netns", "add", h});
    run_tool_checked({"ip", "-n", h, "link", "set", "lo", "up"});
    run_tool_checked(
        {"ip", "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", h});
    run_tool_checked({"ip", "-n", br, "link", "set", port, "master", "br0"});
    run_tool_checked({"ip", "-n", br, "link", "set", port, "up"});
    run_tool_checked({"ip", "-n", h, "addr", "add", address(r) + "/24", "dev", "eth0"});
    run_tool_checked({"ip", "-n", h, "link", "set", "eth0", "up"});
    shape(h, "eth0");  // host -> bridge
    shape(br, port);   // bridge -> host
  }
}

void HostSet::shape(const std::string& ns, const std::string& dev) {
  const std::string rate = std::to_string(link_.rate_bps) + "bit";
  const bool host_side = dev == "eth0";
  if (netem_) {
    // netem shapes the rate itself; the delay and loss go on the host's egress only, so a packet
    // from host a to host b is delayed once.
    std::vector<std::string> a{"tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "netem"};
    if (host_side && link_.delay_us > 0) {
      a.insert(a.end(), {"delay", std::to_string(link_.delay_us) + "us"});
    }
    if (host_side && link_.loss_pct > 0)
      a.insert(a.end(), {"loss", std::to_string(link_.loss_pct) + "%"});
    a.insert(a.end(), {"rate", rate, "limit", "100000"});
    run_tool_checked(a);
    return;
  }
  // tbf: a bucket of one millisecond at the rate (at least 64 KiB, one GSO packet), and a queue of
  // up to 50 ms before packets are dropped (TCP backs off before that).
  const std::uint64_t burst = std::max<std::uint64_t>(65536, link_.rate_bps / 8 / 1000);
  run_tool_checked({"tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                    "burst", std::to_string(burst), "latency", "50ms"});
}

void HostSet::remove() noexcept {
  if (removed_) return;
  removed_ = true;
  std::vector<std::string> all = hosts_;
  all.push_back(bridge_ns_);
  for (const auto& n : all) {
    try {
      run_tool({"ip", "netns", "delete", n});
    } catch (...) {
    }
  }
  try {
    unregister_names(all);
  } catch (...) {
  }
}

}  // namespace exdyna::eval
