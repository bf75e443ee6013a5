// The per-iteration CSVs of `exdyna simulate`: the decisions (byte-identical across engines) and
// every StepStats field.
#pragma once

#include <span>
#include <string>

#include "exdyna/sparsifiers/step_stats.hpp"

namespace exdyna::sim {

// The decisions CSV: iter,threshold,k_total,density,f_t,k_w0..,alloc_w0..,blocks_p0.. (alloc -1
// and blocks 0 for sparsifiers without partitions). Doubles as %.17g. Its format is fixed (decision
// files are compared byte for byte across versions and engines), so its first column keeps the
// name `iter` where the statistics say `iteration`.
std::string decisions_csv(std::span<const sparsifiers::StepStats> steps, int workers);
// Its header line and one row (each ending in '\n'), for a run that digests the decisions as it
// goes instead of keeping every StepStats (sim::StepSeries).
std::string decisions_header(int workers);
void append_decisions_row(std::string& s, const sparsifiers::StepStats& st, int workers);
// Every StepStats field, one row per iteration (this rank's times): the columns of
// sparsifiers::step_stat_columns(workers), integers exact, doubles as %.17g.
std::string stats_csv(std::span<const sparsifiers::StepStats> steps, int workers);

}  // namespace exdyna::sim
