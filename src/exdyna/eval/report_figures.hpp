// The report's figures: each one a CSV (the data behind it), a gnuplot script that reads only
// that CSV (so `gnuplot fig-x.gp` in the output directory redraws it), and a caption. Drawn with
// pngcairo where gnuplot has it, else png.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "exdyna/eval/measurements.hpp"
#include "exdyna/eval/scale_model.hpp"

namespace exdyna::eval {

struct Figure {
  std::string name;     // fig-<name>.png / .csv / .gp
  std::string title;    // for the report's heading and the plot
  std::string caption;  // what it shows, how the data were made
  std::string csv;      // the data
  std::string plot;     // gnuplot commands after the common set-up; `DATA` stands for the CSV
};

// The setting the single-setting figures show: of the measured cells, the one with the largest W,
// then the slowest link, the smallest d, the largest n_g.
struct Setting {
  int workers = 0;
  double bandwidth_bps = 0, density = 0;
  std::int64_t n_g = 0;
};
Setting headline_setting(const std::vector<MeasuredCell>& cells);
std::string setting_text(const Setting& s);

// Per-iteration series of the cells at one setting (label -> series).
using SeriesByLabel = std::map<std::string, CellSeries>;

Figure density_figure(const SeriesByLabel& series, const Setting& s);
Figure f_t_figure(const SeriesByLabel& series, const Setting& s);
// Empty name when no label has both a threshold and a global error.
Figure threshold_figure(const SeriesByLabel& series, const Setting& s);
Figure select_figure(const std::vector<MeasuredCell>& cells, const ScaleModel* model,
                     const Setting& s);
Figure breakdown_figure(const std::vector<MeasuredCell>& cells, const Setting& s,
                        double bandwidth_bps);
Figure model_curves_figure(const std::vector<MeasuredCell>& cells, const ScaleModel& model,
                           const Setting& s, double bandwidth_bps);
// errors: the pooled model's; errors_at_w: the same cells with alpha and beta fitted at their W
// (empty: none; else one per entry of errors, in the same order).
Figure predicted_vs_measured_figure(const std::vector<ModelError>& errors,
                                    const std::vector<ModelError>& errors_at_w);

// Writes fig-<name>.csv and .gp into dir and runs gnuplot on the script; returns the PNG path, or
// an empty path and sets *why when nothing was drawn.
std::filesystem::path draw_figure(const std::filesystem::path& dir, const Figure& f,
                                  const std::string& gnuplot, std::string* why);

// The report's section for one figure: draws it (draw_figure), then a heading, the image, the
// caption, the CSV and the commands that regenerate it. A figure with an empty name gives "".
// Appends the PNG to drawn, or the reason it was not drawn to notes.
std::string figure_md(const std::filesystem::path& dir, const Figure& f, const std::string& gnuplot,
                      const std::string& regenerate, std::vector<std::filesystem::path>& drawn,
                      std::vector<std::string>& notes);

// Labels in the order the report lists them: dense, topk, cltk, hard-threshold, sidco, exdyna-*,
// then any other, alphabetically.
std::vector<std::string> ordered_labels(std::vector<std::string> labels);

}  // namespace exdyna::eval
