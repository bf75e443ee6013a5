// The report's statistical-efficiency section: test accuracy (or perplexity) of the short training
// runs (efficiency.csv) against emulated time, and time to accuracy = iterations to reach the
// target x the emulated iteration time of the label at the report's headline (W, B, d) setting.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "exdyna/eval/measurements.hpp"
#include "exdyna/eval/report.hpp"

namespace exdyna::eval {

// Markdown for the section; a missing or malformed efficiency.csv gives a paragraph that says so
// (and a note), not an error.
std::string efficiency_section(const std::filesystem::path& out_dir,
                               const std::vector<MeasuredCell>& cells, const ReportOptions& opts,
                               const std::string& regenerate,
                               std::vector<std::filesystem::path>& drawn,
                               std::vector<std::string>& notes);

}  // namespace exdyna::eval
