#include "exdyna/eval/rank_launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "exdyna/core/error.hpp"

namespace exdyna::eval {

namespace {

using Clock = std::chrono::steady_clock;

pid_t start_rank(const RankCommand& rc, const std::filesystem::path& out,
                 const std::filesystem::path& err) {
  const int ofd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int efd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  EXDYNA_CHECK(ofd >= 0 && efd >= 0, "cannot create rank logs in ", out.parent_path().string(),
               ": ", std::strerror(errno));
  std::vector<char*> args;
  for (const auto& a : rc.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // The compare's terminal Ctrl-C reaches the ranks too; they die of it, the compare cleans up.
    ::dup2(ofd, STDOUT_FILENO);
    ::dup2(efd, STDERR_FILENO);
    for (const auto& [k, v] : rc.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cannot start %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(ofd);
  ::close(efd);
  EXDYNA_CHECK(pid > 0, "fork failed: ", std::strerror(errno));
  return pid;
}

std::string describe(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "signal " + std::to_string(WTERMSIG(st));
  return "status " + std::to_string(st);
}

}  // namespace

std::string file_tail(const std::filesystem::path& p, int lines) {
  std::ifstream in(p);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::string out;
  const std::size_t from = all.size() > static_cast<std::size_t>(lines) ? all.size() - lines : 0;
  for (std::size_t i = from; i < all.size(); ++i) out += all[i] + "\n";
  return out;
}

RanksResult run_ranks(const std::vector<RankCommand>& ranks, const std::filesystem::path& log_dir,
                      std::chrono::milliseconds deadline, std::chrono::milliseconds grace) {
  std::filesystem::create_directories(log_dir);
  const auto t0 = Clock::now();
  std::vector<pid_t> pids;
  std::vector<bool> done(ranks.size(), false);
  RanksResult res;
  res.ends.resize(ranks.size());
  res.end_s.resize(ranks.size());
  try {
    for (std::size_t r = 0; r < ranks.size(); ++r)
      pids.push_back(start_rank(ranks[r], log_dir / ("rank" + std::to_string(r) + ".out"),
                                log_dir / ("rank" + std::to_string(r) + ".err")));
  } catch (...) {
    for (auto p : pids) ::kill(p, SIGKILL), ::waitpid(p, nullptr, 0);
    throw;
  }
  std::size_t running = pids.size();
  Clock::time_point kill_at = t0 + deadline;
  bool killed = false;
  while (running > 0) {
    for (std::size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int st = 0;
      if (::waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --running;
      res.ends[r] = killed ? "killed by the launcher" : describe(st);
      res.end_s[r] = std::chrono::duration<double>(Clock::now() - t0).count();
      const bool bad = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
      if (bad && res.ok) {
        res.ok = false;
        res.failed_rank = static_cast<int>(r);
        res.why =
            killed ? "timed out after " +
                         std::to_string(
                             std::chrono::duration_cast<std::chrono::seconds>(deadline).count()) +
                         " s"
                   : describe(st);
        res.stderr_tail = file_tail(log_dir / ("rank" + std::to_string(r) + ".err"));
        // The peers of a failed rank fail on their own within their --timeout; do not wait for it.
        kill_at = std::min(kill_at, Clock::now() + grace);
      }
    }
    if (running == 0) break;
    if (!killed && Clock::now() >= kill_at) {
      killed = true;
      for (std::size_t r = 0; r < pids.size(); ++r)
        if (!done[r]) ::kill(pids[r], SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  res.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

}  // namespace exdyna::eval
