// A cell's per-rank statistics (`exdyna simulate --stats`, the measured iterations only) and the
// CPU times the comparison charges a cell from them: the non-communication work of the slowest
// rank and that rank's selection.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace exdyna::eval {

// One rank's stats.csv, iterations from `warmup` on, column by column.
struct StatsColumns {
  std::map<std::string, std::vector<double>> col;
  std::size_t rows = 0;
  double mean(const std::string& name) const;  // over the non-NaN values; DataError if absent
};

// Throws DataError on an unreadable file, a malformed row or no measured iteration.
StatsColumns read_rank_stats(const std::filesystem::path& path, int warmup);

// Every rank's statistics of the cell run in dir that exist: rank 0's dir/stats.csv, rank r's
// dir/logs/stats-r<r>.csv (the model network's one process writes rank 0's only).
std::vector<StatsColumns> read_run_stats(const std::filesystem::path& dir, int workers, int warmup);

struct IterationCpu {
  std::size_t row = 0;  // the measured iteration (0: the first after the warm-up)
  double non_comm_s = 0, select_s = 0;
};

// The cell's non-communication CPU time and selection: per measured iteration the slowest rank's,
// then the median iteration (see the definition for why). ranks must not be empty.
IterationCpu median_iteration(const std::vector<StatsColumns>& ranks);

}  // namespace exdyna::eval
