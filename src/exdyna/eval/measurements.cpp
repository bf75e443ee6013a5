#include "exdyna/eval/measurements.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "exdyna/core/error.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto comma = line.find(',', start);
    out.emplace_back(
        line.substr(start, comma == std::string_view::npos ? line.npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(detail::concat(path.string(), ": cannot be read"));
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Strict: the whole field must be a number (strtod also takes "nan", "inf").
bool to_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

CsvTable CsvTable::parse(std::string_view text, const std::string& source,
                         const std::vector<std::string>& required) {
  CsvTable t;
  t.source_ = source;
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    auto fields = split(line);
    if (t.header_.empty()) {
      t.header_ = std::move(fields);
      continue;
    }
    if (fields.size() != t.header_.size())
      throw DataError(detail::concat(source, " line ", line_no, ": ", fields.size(),
                                     " fields, expected ", t.header_.size(), " (as the header)"));
    t.rows_.push_back(std::move(fields));
    t.lines_.push_back(line_no);
  }
  if (t.header_.empty()) throw DataError(detail::concat(source, ": empty, expected a CSV header"));
  for (const auto& r : required)
    if (!t.has(r))
      throw DataError(detail::concat(source, " line 1: the header lacks the column '", r, "'"));
  return t;
}

CsvTable CsvTable::read(const fs::path& path, const std::vector<std::string>& required) {
  return parse(read_all(path), path.string(), required);
}

bool CsvTable::has(std::string_view column) const {
  for (const auto& h : header_)
    if (h == column) return true;
  return false;
}

std::size_t CsvTable::col(std::string_view column) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == column) return i;
  throw DataError(detail::concat(source_, " line 1: the header lacks the column '", column, "'"));
}

const std::string& CsvTable::text(std::size_t row, std::string_view column) const {
  return rows_.at(row)[col(column)];
}

double CsvTable::num(std::size_t row, std::string_view column) const {
  const auto& s = text(row, column);
  double v = 0;
  if (!to_double(s, v))
    throw DataError(detail::concat(source_, " line ", lines_.at(row), ": column '", column,
                                   "' is '", s, "', expected a number"));
  return v;
}

double CsvTable::num_or_nan(std::size_t row, std::string_view column) const {
  if (!has(column) || text(row, column).empty()) return std::nan("");
  return num(row, column);
}

const std::vector<std::string>& cells_columns() {
  static const std::vector<std::string> c = {
      "sparsifier",     "label",         "workers",      "bandwidth_bps",
      "delay_us",       "density",       "n_g",          "iterations",
      "compute_ms",     "iter_ms",       "non_comm_ms",  "select_ms",
      "comm_ms",        "allgather_ms",  "allreduce_ms", "broadcast_ms",
      "bytes_per_iter", "density_ratio", "f_t",          "global_error"};
  return c;
}

const std::vector<std::string>& comm_columns() {
  static const std::vector<std::string> c = {"workers", "bandwidth_bps", "delay_us",
                                             "op",      "bytes",         "time_s"};
  return c;
}

std::vector<MeasuredCell> read_cells(const fs::path& path) {
  const auto t = CsvTable::read(path, cells_columns());
  std::vector<MeasuredCell> out;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    MeasuredCell c;
    c.sparsifier = t.text(r, "sparsifier");
    c.label = t.text(r, "label");
    c.workers = static_cast<int>(t.num(r, "workers"));
    c.bandwidth_bps = t.num(r, "bandwidth_bps");
    c.delay_us = t.num(r, "delay_us");
    c.density = t.num(r, "density");
    c.n_g = static_cast<std::int64_t>(t.num(r, "n_g"));
    c.iterations = static_cast<std::int64_t>(t.num(r, "iterations"));
    double* ms[] = {&c.compute_ms, &c.iter_ms,      &c.non_comm_ms,  &c.select_ms,
                    &c.comm_ms,    &c.allgather_ms, &c.allreduce_ms, &c.broadcast_ms};
    const char* names[] = {"compute_ms", "iter_ms",      "non_comm_ms",  "select_ms",
                           "comm_ms",    "allgather_ms", "allreduce_ms", "broadcast_ms"};
    for (std::size_t i = 0; i < 8; ++i) {
      *ms[i] = t.num(r, names[i]);
      if (!(*ms[i] >= 0))
        throw DataError(detail::concat(path.string(), " line ", t.line(r), ": column '", names[i],
                                       "' is ", *ms[i], ", expected a time >= 0"));
    }
    c.bytes_per_iter = t.num(r, "bytes_per_iter");
    c.density_ratio = t.num(r, "density_ratio");
    c.f_t = t.num(r, "f_t");
    c.global_error = t.num(r, "global_error");
    c.collectives_per_iter = t.num_or_nan(r, "collectives_per_iter");
    c.fused_share = t.num_or_nan(r, "fused_share");
    if (c.label.empty() || c.workers < 1 || c.n_g < 1 || !(c.bandwidth_bps > 0) ||
        !(c.density > 0 && c.density <= 1))
      throw DataError(detail::concat(path.string(), " line ", t.line(r),
                                     ": expected a label, workers >= 1, n_g >= 1, bandwidth_bps > 0"
                                     " and density in (0, 1]"));
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<CommPoint> read_comm(const fs::path& path) {
  const auto t = CsvTable::read(path, comm_columns());
  std::vector<CommPoint> out;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    CommPoint p;
    p.workers = static_cast<int>(t.num(r, "workers"));
    p.bandwidth_bps = t.num(r, "bandwidth_bps");
    p.delay_us = t.num(r, "delay_us");
    p.op = t.text(r, "op");
    p.bytes = t.num(r, "bytes");
    p.time_s = t.num(r, "time_s");
    p.algorithm = t.has("algorithm") ? t.text(r, "algorithm") : "ring";
    if (p.workers < 1 || !(p.bandwidth_bps > 0) || !(p.bytes >= 0) || !(p.time_s > 0))
      throw DataError(detail::concat(path.string(), " line ", t.line(r),
                                     ": expected workers >= 1, bandwidth_bps > 0, bytes >= 0 and "
                                     "time_s > 0"));
    out.push_back(std::move(p));
  }
  return out;
}

std::map<double, double> without_stalls(const std::map<double, double>& time_by_bytes) {
  std::map<double, double> kept;
  double fastest_above = std::numeric_limits<double>::infinity();
  for (auto it = time_by_bytes.rbegin(); it != time_by_bytes.rend(); ++it) {
    if (it->second > fastest_above) continue;
    kept.emplace(it->first, it->second);
    fastest_above = it->second;
  }
  return kept;
}

std::vector<CommPoint> without_stalls(const std::vector<CommPoint>& points) {
  using Series = std::tuple<std::string, int, double, double>;  // op, W, rate, delay
  std::map<Series, std::map<double, double>> series;
  for (const auto& p : points)
    series[{p.op, p.workers, p.bandwidth_bps, p.delay_us}][p.bytes] = p.time_s;
  std::map<Series, std::map<double, double>> kept;
  for (const auto& [key, s] : series) kept[key] = without_stalls(s);
  std::vector<CommPoint> out;
  for (const auto& p : points) {
    const auto& k = kept[{p.op, p.workers, p.bandwidth_bps, p.delay_us}];
    const auto it = k.find(p.bytes);
    if (it != k.end() && it->second == p.time_s) out.push_back(p);
  }
  return out;
}

CellSeries read_stats(const fs::path& path) {
  const auto t = CsvTable::read(path, {"iteration", "density", "f_t"});
  CellSeries s;
  struct Col {
    const char* name;
    std::vector<double>* v;
  };
  const Col cols[] = {{"iteration", &s.iter},
                      {"density", &s.density},
                      {"target_density", &s.target_density},
                      {"f_t", &s.f_t},
                      {"threshold", &s.threshold},
                      {"global_error", &s.global_error},
                      {"k_total", &s.k_total},
                      {"k_unique", &s.k_unique},
                      {"bytes_allgather_counts", &s.bytes_allgather_counts},
                      {"t_select", &s.t_select}};
  for (std::size_t r = 0; r < t.rows(); ++r)
    for (const auto& c : cols) c.v->push_back(t.num_or_nan(r, c.name));
  return s;
}

std::optional<double> parse_rate(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                          s[i] == 'e' || s[i] == '+'))
    ++i;
  double v = 0;
  if (!to_double(std::string(s.substr(0, i)), v) || !(v > 0)) return std::nullopt;
  const auto unit = s.substr(i);
  if (unit.empty() || unit == "bit" || unit == "bps") return v;
  if (unit == "kbit") return v * 1e3;
  if (unit == "mbit") return v * 1e6;
  if (unit == "gbit") return v * 1e9;
  return std::nullopt;
}

std::string rate_text(double bps) {
  char buf[32];
  if (bps >= 1e9)
    std::snprintf(buf, sizeof buf, "%g Gbit/s", bps / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%g Mbit/s", bps / 1e6);
  return buf;
}

std::string num_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

namespace {

// `<label>-w<W>-b<B>-d<d>`, the label itself may contain '-'.
std::optional<CellKey> key_from_name(const std::string& name) {
  const auto pd = name.rfind("-d"), pb = name.rfind("-b", pd), pw = name.rfind("-w", pb);
  if (pd == std::string::npos || pb == std::string::npos || pw == std::string::npos || pw == 0)
    return std::nullopt;
  CellKey k;
  k.label = name.substr(0, pw);
  double w = 0, d = 0;
  if (!to_double(name.substr(pw + 2, pb - pw - 2), w) || !to_double(name.substr(pd + 2), d))
    return std::nullopt;
  const auto b = parse_rate(name.substr(pb + 2, pd - pb - 2));
  if (!b) return std::nullopt;
  k.workers = static_cast<int>(w);
  k.bandwidth_bps = *b;
  k.density = d;
  return k;
}

std::optional<CellKey> key_from_json(const fs::path& file) {
  try {
    const auto j = nlohmann::json::parse(read_all(file));
    const auto& row = j.contains("row") ? j.at("row") : j;
    CellKey k;
    k.label = row.at("label").get<std::string>();
    k.workers = row.at("workers").get<int>();
    k.bandwidth_bps = row.at("bandwidth_bps").get<double>();
    k.density = row.at("density").get<double>();
    return k;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::map<CellKey, fs::path> find_cell_dirs(const fs::path& out_dir) {
  std::map<CellKey, fs::path> out;
  const auto cells = out_dir / "cells";
  std::error_code ec;
  if (!fs::is_directory(cells, ec)) return out;
  for (const auto& e : fs::directory_iterator(cells, ec)) {
    if (!e.is_directory()) continue;
    auto k = key_from_json(e.path() / "cell.json");
    if (!k) k = key_from_name(e.path().filename().string());
    if (k) out[*k] = e.path();
  }
  return out;
}

}  // namespace exdyna::eval
