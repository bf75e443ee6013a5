// The plots of a training run, drawn with gnuplot from the CSVs the run wrote (metrics.hpp).
// Torch-free.
#pragma once

#include <string>
#include <vector>

#include "exdyna/train/metrics.hpp"

namespace exdyna::train {

// Draws the plots with gnuplot (pngcairo, else png) from the CSVs already written in dir; returns
// the PNG paths written. When gnuplot is missing, returns none and sets *why.
std::vector<std::string> write_plots(const std::string& dir, const RunLog& log,
                                     double target_density, const std::string& title,
                                     std::string* why);

}  // namespace exdyna::train
