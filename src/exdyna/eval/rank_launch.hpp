// Starts the ranks of one job (each with its own argv, e.g. `ip netns exec <host> exdyna simulate
// ...`, and its own environment additions), waits for all of them with a deadline, and reports
// the first failure with the tail of that rank's standard error. Never hangs: at the deadline, or
// a few seconds after the first rank fails, the survivors are killed. Every rank dies with this
// process (PR_SET_PDEATHSIG), so an interrupted compare leaves no rank behind.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace exdyna::eval {

struct RankCommand {
  std::vector<std::string> argv;                         // argv[0]: an absolute path
  std::vector<std::pair<std::string, std::string>> env;  // set on top of this process's
};

struct RanksResult {
  bool ok = true;
  int failed_rank = -1;     // the first rank that failed (or -1)
  std::string why;          // "exit 1", "signal 9", "timed out after 120 s"
  std::string stderr_tail;  // last lines of the failed rank's standard error
  double wall_s = 0;
  // Per rank: how it ended ("exit 0", "exit 1", "signal 6", or "killed by the launcher" when the
  // deadline or the grace after the first failure ran out) and when, in seconds from the start.
  std::vector<std::string> ends;
  std::vector<double> end_s;
};

// Runs every rank; rank r's standard output goes to log_dir/rank<r>.out, its standard error to
// log_dir/rank<r>.err (log_dir is created). Once a rank has failed, the others get `grace` to end
// on their own before they are killed.
RanksResult run_ranks(const std::vector<RankCommand>& ranks, const std::filesystem::path& log_dir,
                      std::chrono::milliseconds deadline,
                      std::chrono::milliseconds grace = std::chrono::seconds(5));

// The last `lines` lines of a file ("" when it cannot be read).
std::string file_tail(const std::filesystem::path& p, int lines = 8);

}  // namespace exdyna::eval
