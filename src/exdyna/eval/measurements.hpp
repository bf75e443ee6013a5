// The comparison's measurements as the report and the scale model read them: cells.csv (one row per
// finished cell), comm.csv (the collective sweep) and each cell's per-iteration stats.csv, through
// one small CSV reader that refuses a malformed file naming the file, the line and the field.
// The files' formats are fixed in the comparison's spec (cells.csv, comm.csv) and by `exdyna
// simulate --stats` (stats.csv); nothing here writes them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exdyna::eval {

// A CSV file read whole: a header and rows of fields, no quoting (none of the comparison's files
// quote). Every row has exactly the header's number of fields, else parse() throws DataError.
class CsvTable {
 public:
  // source names the file in messages. required: columns the header must have.
  static CsvTable parse(std::string_view text, const std::string& source,
                        const std::vector<std::string>& required = {});
  static CsvTable read(const std::filesystem::path& path,
                       const std::vector<std::string>& required = {});

  std::size_t rows() const { return rows_.size(); }
  bool has(std::string_view column) const;
  const std::string& text(std::size_t row, std::string_view column) const;
  // The field as a number ("nan" and "inf" allowed); anything else throws DataError naming the
  // file, the line, the column and the text.
  double num(std::size_t row, std::string_view column) const;
  // As num(), but NaN where the column is absent or the field empty.
  double num_or_nan(std::size_t row, std::string_view column) const;
  const std::vector<std::string>& header() const { return header_; }
  std::size_t line(std::size_t row) const { return lines_.at(row); }  // 1-based, in the file

 private:
  std::size_t col(std::string_view column) const;
  std::string source_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<std::size_t> lines_;  // 1-based line of each row in the file
};

// One row of cells.csv (times in ms per iteration, bytes per worker and iteration).
struct MeasuredCell {
  std::string sparsifier, label;
  int workers = 0;
  double bandwidth_bps = 0, delay_us = 0, density = 0;
  std::int64_t n_g = 0, iterations = 0;
  double compute_ms = 0, iter_ms = 0, non_comm_ms = 0, select_ms = 0, comm_ms = 0;
  double allgather_ms = 0, allreduce_ms = 0, broadcast_ms = 0;
  double bytes_per_iter = 0, density_ratio = 0, f_t = 0, global_error = 0;
  // Collective calls per iteration (NaN in a cells.csv written before the column existed).
  double collectives_per_iter = std::numeric_limits<double>::quiet_NaN();
  // Of the measured iterations, the share whose counts and indices travelled in one all-gather
  // (ExDyna's exact controller under a cap; NaN where cells.csv predates the column).
  double fused_share = std::numeric_limits<double>::quiet_NaN();
};

// One row of comm.csv: the mean time of one call of `op` with `bytes` per rank.
struct CommPoint {
  int workers = 0;
  double bandwidth_bps = 0, delay_us = 0;
  std::string op;  // allreduce, allgather-padded, allgather-exact, broadcast
  double bytes = 0, time_s = 0;
  // What the engine ran: ring (also every operation without a choice), bcube or bruck (log2 W
  // rounds; `bench comm`'s last column). Absent in an older comm.csv: ring.
  std::string algorithm = "ring";
};

// A collective's time does not fall as its size grows, so a sweep point slower than a larger size
// of the same op on the same setting was stalled (W ranks on 2 cores: one scheduler hiccup through
// all of a size's calls; seen: a 1 MiB all-reduce at 8 hosts, 1 Gbit/s, 89.8 ms, median of 5 calls,
// against 61.5 ms at 4 MiB and 24.0 ms at 256 KiB). Of one series (time by bytes per rank) the
// points that no larger size beat: the lower envelope seen from the largest size down. The cells'
// communication (interpolated between these points) and the scale model's fits both use it.
std::map<double, double> without_stalls(const std::map<double, double>& time_by_bytes);
// The same for every (op, workers, bandwidth, delay) series of comm.csv's points; order kept.
std::vector<CommPoint> without_stalls(const std::vector<CommPoint>& points);

// The header of cells.csv exactly as the spec fixes it.
const std::vector<std::string>& cells_columns();
const std::vector<std::string>& comm_columns();

// Throw DataError naming the file and line on a missing column, a short row or a field that is not
// a number, and on values out of range (workers < 1, n_g < 1, negative times).
std::vector<MeasuredCell> read_cells(const std::filesystem::path& path);
std::vector<CommPoint> read_comm(const std::filesystem::path& path);

// Per-iteration series of one cell (rank 0's stats.csv), the columns the figures use.
struct CellSeries {
  std::vector<double> iter, density, target_density, f_t, threshold, global_error, k_total,
      k_unique, bytes_allgather_counts, t_select;
};
CellSeries read_stats(const std::filesystem::path& path);

// The directory of each cell under DIR/cells: from its cell.json (label, workers, bandwidth_bps,
// density) or, without one, from the name `<label>-w<W>-b<B>-d<d>`. Cells that match neither are
// skipped.
struct CellKey {
  std::string label;
  int workers = 0;
  double bandwidth_bps = 0, density = 0;
  auto operator<=>(const CellKey&) const = default;
};
std::map<CellKey, std::filesystem::path> find_cell_dirs(const std::filesystem::path& out_dir);

// "1gbit" -> 1e9, "100mbit" -> 1e8, "10000000000" -> 1e10; nullopt when not a rate.
std::optional<double> parse_rate(std::string_view s);
// 1e9 -> "1 Gbit/s".
std::string rate_text(double bps);
// Shortest text that reads back as the same double ("%.9g").
std::string num_text(double v);

}  // namespace exdyna::eval
