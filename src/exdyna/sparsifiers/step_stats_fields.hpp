// StepStats as one list of named fields. Every writer of the statistics (the simulate and training
// CSVs, the training summary, the Python stats dict) iterates this list, so each name is spelled
// once and a field added to StepStats is one entry here (step_stats_fields.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sparsifiers {

// A field's value: counts and bytes as exact integers, the rest as doubles.
using StatValue = std::variant<std::int64_t, double>;

// One scalar: its name (the CSV column after its group's prefix, the Python key), a one-line
// description with its unit, and how to read it.
struct StatField {
  std::string_view name;
  std::string_view description;
  StatValue (*read)(const StepStats&);
};

// Fields of one part of StepStats (the bytes, the phase times): in a CSV the column is
// column_prefix + field name, in Python a nested dict stats[name][field name].
struct StatGroup {
  std::string_view name;
  std::string_view column_prefix;
  std::string_view description;
  std::span<const StatField> fields;
};

// One integer per worker (or per partition): in a CSV the columns column_prefix + 0, 1, ..., one
// per worker, `missing` where the step has fewer entries; in Python a list.
struct PerWorkerField {
  std::string_view name;
  std::string_view column_prefix;
  std::string_view description;
  std::int64_t missing;
  std::vector<std::int64_t> (*read)(const StepStats&);
};

// The lists, in the order the CSVs write them: scalars, groups, per-worker fields.
std::span<const StatField> step_scalar_fields();
std::span<const StatGroup> step_field_groups();
std::span<const PerWorkerField> step_per_worker_fields();

// Every CSV column name in order, the per-worker fields with `workers` columns each.
std::vector<std::string> step_stat_columns(int workers);
// One step's values, column for column with step_stat_columns(workers).
std::vector<StatValue> step_stat_values(const StepStats& s, int workers);
// The scalar and group columns only (what a mean over iterations means something for).
std::vector<std::string> step_scalar_columns();
std::vector<StatValue> step_scalar_values(const StepStats& s);

// A value as a double (integers beyond 2^53 rounded), for means and plots.
double stat_as_double(const StatValue& v);

}  // namespace exdyna::sparsifiers
