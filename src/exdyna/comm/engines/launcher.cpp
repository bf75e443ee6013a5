#include "exdyna/comm/engines/launcher.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "exdyna/comm/job_token.hpp"
#include "exdyna/core/error.hpp"

namespace exdyna::comm {

namespace {

using Clock = std::chrono::steady_clock;

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1, err_fd = -1;
  std::string out_buf, err_buf;
  bool exited = false;
  int status = 0;
};

void write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<std::size_t>(w);
  }
}

// Emits complete lines from buf with the rank prefix; the rest stays for the next read.
void flush_lines(std::string& buf, int rank, int fd, bool show, bool final) {
  std::size_t start = 0;
  for (;;) {
    const auto nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    if (show)
      write_all(fd, "[rank " + std::to_string(rank) + "] " + buf.substr(start, nl - start + 1));
    start = nl + 1;
  }
  buf.erase(0, start);
  if (final && !buf.empty()) {
    if (show) write_all(fd, "[rank " + std::to_string(rank) + "] " + buf + "\n");
    buf.clear();
  }
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "unknown status";
}

bool failed(int status) {
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status) ? WEXITSTATUS(status) : 1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::vector<std::string> self_argv() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < all.size()) {
    const auto end = all.find('\0', start);
    out.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

int free_port(const std::string& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXDYNA_CHECK_T(CommError, fd >= 0, "launcher: socket() failed: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (::inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    throw InvalidArgument(
        detail::concat("launcher: address '", addr, "' is not a valid IPv4 address"));
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw CommError(detail::concat("launcher: cannot bind ", addr, ": ", why));
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

namespace {

// The child's side of the fork: wires its output to the pipes, sets the torchrun-style rendezvous
// variables and becomes the worker. Never returns.
[[noreturn]] void exec_worker(const LaunchOptions& opt, int rank, int port, pid_t parent, int out_w,
                              int err_w, const std::vector<char*>& args) {
  // Die with the launcher, so a killed launcher never leaves workers behind.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  ::dup2(out_w, STDOUT_FILENO);
  ::dup2(err_w, STDERR_FILENO);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(opt.workers).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(opt.workers).c_str(), 1);
  ::setenv("MASTER_ADDR", opt.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("EXDYNA_LAUNCHED", "1", 1);
  ::setenv("EXDYNA_JOB_TOKEN", opt.job_token.c_str(), 1);
  // One BLAS thread per rank unless the user chose: the ranks already fill the cores.
  ::setenv("OPENBLAS_NUM_THREADS", "1", 0);
  ::execv(opt.exe.c_str(), args.data());
  std::fprintf(stderr, "exdyna: launcher: cannot start %s: %s\n", opt.exe.c_str(),
               std::strerror(errno));
  ::_exit(127);
}

// Forks one worker per rank, each with its stdout and stderr on a pipe the launcher reads.
std::vector<Worker> spawn_workers(const LaunchOptions& opt, int port) {
  std::vector<Worker> ws(static_cast<std::size_t>(opt.workers));
  std::vector<char*> args;
  for (const auto& a : opt.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  for (int r = 0; r < opt.workers; ++r) {
    int out_p[2], err_p[2];
    EXDYNA_CHECK_T(CommError, ::pipe2(out_p, O_CLOEXEC) == 0 && ::pipe2(err_p, O_CLOEXEC) == 0,
                   "launcher: pipe() failed: ", std::strerror(errno));
    const pid_t pid = ::fork();
    EXDYNA_CHECK_T(CommError, pid >= 0, "launcher: fork() failed: ", std::strerror(errno));
    if (pid == 0) exec_worker(opt, r, port, parent, out_p[1], err_p[1], args);
    ::close(out_p[1]);
    ::close(err_p[1]);
    auto& w = ws[static_cast<std::size_t>(r)];
    w.rank = r;
    w.pid = pid;
    w.out_fd = out_p[0];
    w.err_fd = err_p[0];
  }
  return ws;
}

bool any_pipe_open(const std::vector<Worker>& ws) {
  return std::any_of(ws.begin(), ws.end(),
                     [](const Worker& w) { return w.out_fd >= 0 || w.err_fd >= 0; });
}

void close_pipes(std::vector<Worker>& ws) {
  for (auto& w : ws) {
    if (w.out_fd >= 0) ::close(w.out_fd);
    if (w.err_fd >= 0) ::close(w.err_fd);
    w.out_fd = w.err_fd = -1;
  }
}

// Waits up to 100 ms for output and forwards the complete lines with their rank prefix: stderr of
// every rank, stdout of rank 0 only unless all ranks' output is asked for. A pipe at its end is
// flushed and closed.
void pump_output(std::vector<Worker>& ws, bool all_ranks_output) {
  std::vector<pollfd> fds;
  std::vector<std::pair<std::size_t, bool>> owner;  // (worker, is_stdout)
  for (std::size_t i = 0; i < ws.size(); ++i) {
    if (ws[i].out_fd >= 0) {
      fds.push_back({ws[i].out_fd, POLLIN, 0});
      owner.emplace_back(i, true);
    }
    if (ws[i].err_fd >= 0) {
      fds.push_back({ws[i].err_fd, POLLIN, 0});
      owner.emplace_back(i, false);
    }
  }
  if (!fds.empty())
    ::poll(fds.data(), fds.size(), 100);
  else
    ::usleep(50'000);
  char buf[65536];
  for (std::size_t j = 0; j < fds.size(); ++j) {
    if (!(fds[j].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    auto& w = ws[owner[j].first];
    const bool is_out = owner[j].second;
    int& fd = is_out ? w.out_fd : w.err_fd;
    std::string& b = is_out ? w.out_buf : w.err_buf;
    const bool show = !is_out || w.rank == 0 || all_ranks_output;
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      b.append(buf, static_cast<std::size_t>(n));
      flush_lines(b, w.rank, is_out ? STDOUT_FILENO : STDERR_FILENO, show, false);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      flush_lines(b, w.rank, is_out ? STDOUT_FILENO : STDERR_FILENO, show, true);
      ::close(fd);
      fd = -1;
    }
  }
}

// What the launcher does once a rank has failed: when the survivors are ended, and how far it got.
struct Shutdown {
  std::optional<int> first_failed;
  std::optional<Clock::time_point> kill_at;
  bool terminated = false, killed = false, shortened = false;
};

// Collects the workers that exited; the first failure starts the survivors' timeout. Returns how
// many exited.
int reap(std::vector<Worker>& ws, const LaunchOptions& opt, Shutdown& sd) {
  int reaped = 0;
  for (auto& w : ws) {
    if (w.exited) continue;
    int st = 0;
    const pid_t p = ::waitpid(w.pid, &st, WNOHANG);
    if (p != w.pid) continue;
    w.exited = true;
    w.status = st;
    ++reaped;
    if (failed(st) && !sd.first_failed) {
      sd.first_failed = w.rank;
      sd.kill_at = Clock::now() + opt.timeout + opt.grace;
      std::fprintf(stderr,
                   "exdyna: launcher: rank %d failed (%s); waiting up to %.1f s for the others\n",
                   w.rank, describe(st).c_str(),
                   std::chrono::duration<double>(opt.timeout + opt.grace).count());
    }
  }
  return reaped;
}

// After a failure, survivors normally fail on their own within the timeout; this ends the rest:
// SIGTERM at the deadline, SIGKILL two seconds later.
void end_survivors(std::vector<Worker>& ws, const LaunchOptions& opt, int running, Shutdown& sd) {
  const auto now = Clock::now();
  // With a rank failed and only one left, that one has no peer to complete a collective with:
  // it is stuck (or about to fail), so it gets the grace only, not the whole timeout.
  if (!sd.terminated && !sd.shortened && running == 1 && opt.workers > 1 &&
      now + opt.grace < *sd.kill_at) {
    sd.shortened = true;
    sd.kill_at = now + opt.grace;
  }
  if (!sd.terminated && now >= *sd.kill_at) {
    sd.terminated = true;
    for (auto& w : ws)
      if (!w.exited) {
        std::fprintf(stderr,
                     "exdyna: launcher: terminating rank %d (still running after rank %d failed)\n",
                     w.rank, *sd.first_failed);
        ::kill(w.pid, SIGTERM);
      }
    sd.kill_at = now + std::chrono::seconds(2);
  } else if (sd.terminated && !sd.killed && now >= *sd.kill_at) {
    sd.killed = true;
    for (auto& w : ws)
      if (!w.exited) ::kill(w.pid, SIGKILL);
  }
}

// Prints every rank's status and returns the exit code of the rank that failed first.
int report_failure(const std::vector<Worker>& ws, int first_failed) {
  std::string summary;
  for (const auto& w : ws)
    summary +=
        detail::concat(summary.empty() ? "" : ", ", "rank ", w.rank, ": ", describe(w.status));
  std::fprintf(stderr, "exdyna: launcher: rank %d failed first; %s\n", first_failed,
               summary.c_str());
  return exit_code(ws[static_cast<std::size_t>(first_failed)].status);
}

}  // namespace

int launch_local(const LaunchOptions& options) {
  LaunchOptions opt = options;
  if (opt.job_token.empty()) opt.job_token = job_token_from_env();
  if (opt.job_token.empty()) opt.job_token = generate_job_token();
  EXDYNA_CHECK_ARG(opt.workers >= 1, "launcher: --workers ", opt.workers,
                   " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(!opt.argv.empty(), "launcher: empty argv");
  const int port = opt.master_port > 0 ? opt.master_port : free_port(opt.master_addr);
  std::fflush(stdout);
  std::fflush(stderr);

  std::vector<Worker> ws = spawn_workers(opt, port);
  Shutdown sd;
  int running = opt.workers;
  std::optional<Clock::time_point> all_exited;
  while (running > 0 || any_pipe_open(ws)) {
    // Every worker is gone but a pipe is still open (a descendant inherited it): drain briefly,
    // then stop listening rather than wait for that descendant.
    if (running == 0) {
      if (!all_exited) all_exited = Clock::now();
      if (Clock::now() - *all_exited > std::chrono::seconds(2)) {
        close_pipes(ws);
        break;
      }
    }
    pump_output(ws, opt.all_ranks_output);
    running -= reap(ws, opt, sd);
    if (sd.kill_at && running > 0) end_survivors(ws, opt, running, sd);
  }
  if (!sd.first_failed) return 0;
  return report_failure(ws, *sd.first_failed);
}

}  // namespace exdyna::comm
