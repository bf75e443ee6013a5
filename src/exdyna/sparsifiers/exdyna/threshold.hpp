// Online threshold scaling (paper Alg. 5) and its first threshold.
//
// Thresholds are kept in double and compared in float (|acc| >= (float)threshold), so repeated
// scaling by 1 +- gamma does not lose the small steps to float rounding.
#pragma once

#include <cstdint>
#include <span>

#include "exdyna/sparsifiers/exdyna/selection.hpp"

namespace exdyna::sparsifiers {

// The authors' choice (docs/controller.md): the first threshold is 1 / (2 sqrt(k)). Throws
// InvalidArgument for k < 1.
double initial_threshold(std::int64_t k);

// Alg. 5 lines 1-7: exam = k'/k; 1 + gamma if exam > beta, 1 + gamma/4 if exam > 1/beta, else
// 1 - gamma. (Inside the band the threshold still creeps up by gamma/4: the paper's choice.)
double paper_scale_factor(std::int64_t k, std::int64_t k_actual, double beta, double gamma);

// Alg. 5 line 8: delta_{t+1} = delta_t * sf.
inline double paper_next_threshold(double threshold, std::int64_t k, std::int64_t k_actual,
                                   double beta, double gamma) {
  return threshold * paper_scale_factor(k, k_actual, beta, gamma);
}

// The histogram controller. Every worker counts, in its selection pass, how many |acc| of
// its partition lie above each rung of a geometric ladder placed around the current threshold
// (select_threshold_ladder); the bins ride along with the count all-gather. Partitions are
// exclusive, so the summed bins are the exact global count at every rung, and the next threshold
// is the one that would have selected k in this iteration: interpolated between the two rungs
// that bracket k (log count against log threshold, i.e. a local power law), or the ladder's end
// when k lies outside it.
//
// Only values above the lowest rung cost anything beyond the plain selection pass, so the ladder
// reaches just `steady_down` rungs below the threshold while k stays bracketed and the threshold
// moves little; further after it moved (twice the recent movement), half the ladder below after
// k fell under the ladder (a cold start from too high a threshold), and at least `min_down` while
// the exact controller's worker cap binds (cap_pressure). Above the threshold the ladder is free:
// those values are selected anyway. The exact controller (ladder_cut.hpp) uses the same ladder
// for the iteration that produced it and this class only to place the next ladder.
class HistogramController {
 public:
  // rungs R (odd, >= 3) spanning `span` either way: 2^m rungs per octave with
  // m = round(log2((R - 1) / (2 log2 span))), clamped to 0..10. While k stays bracketed the
  // ladder reaches a quarter octave below the threshold (max(1, 2^m / 4) rungs).
  HistogramController(int rungs, double span);

  int rungs() const { return rungs_; }
  int mant_bits() const { return mant_bits_; }
  int down() const { return down_; }
  int steady_down() const { return steady_down_; }
  int wide_down() const { return (rungs_ - 1) / 2; }
  void set_down(int d);  // from a checkpoint; throws InvalidArgument outside 0..R-1

  // The trend carried between iterations (see next_threshold), for checkpoints.
  double last_exact() const { return last_exact_; }
  double log_trend() const { return log_trend_; }
  double movement() const { return vol_; }  // recent |log ratio| of exact thresholds, held
  // The reach below that the movement alone asks for: the steady reach plus twice the held
  // movement's part above 5 %, in rungs (next_threshold's reach before the cap's floor).
  int movement_down() const;
  void set_trend(double last_exact, double log_trend, double movement = 0);

  // The ladder for this threshold: rung `down()` is the grid value at or just below it.
  LadderGrid grid(double threshold) const;

  // bins: the summed bins of grid(threshold) over all workers. Returns the next threshold and
  // chooses the next ladder's reach below it.
  //
  // The threshold that selected exactly k in iteration t is late for t+1 whenever |acc| drifts
  // (error feedback grows the residual, gradients decay): while k stays bracketed, the smoothed
  // log-ratio of successive exact thresholds (weight 0.25 on the newest), damped to 0.7, is
  // applied once more as a prediction. A ratio outside [0.8, 1.25] is a jump (a scale step), not a
  // drift, and resets the trend. Between the bracketing rungs the estimate is quadratic in
  // log-log through a third rung above (when it holds a count), linear otherwise.
  double next_threshold(double threshold, std::int64_t k, std::span<const std::int64_t> bins);

  // Before next_threshold, for the exact controller's worker cap, which moves the busiest
  // workers' excess to the others (whose ladders must then reach further below the global cut):
  // when this iteration's ladders ran out before k (`short_of_k`) the reach doubles; while the
  // cap binds it stays at least half an octave (twice the steady reach); once it no longer binds
  // it halves back towards the steady reach. next_threshold never reaches less than this.
  void cap_pressure(bool binds, bool short_of_k);
  // After cap_pressure, while the cap binds and the ladders held k: `spread`, how many rungs the
  // deepest worker's own cut fell below the threshold's rung. The floor follows spread plus half
  // an octave of margin (twice the steady reach): up at once, down halfway per iteration, never
  // under cap_pressure's binding floor, never over wide_down().
  void cap_spread(int spread);
  int min_down() const { return min_down_; }
  void set_min_down(int d);  // from a checkpoint; throws InvalidArgument outside steady..wide

 private:
  int rungs_;
  int mant_bits_;
  int steady_down_;
  int down_;
  int min_down_;            // the worker cap's floor under the reach (cap_pressure)
  double last_exact_ = -1;  // last bracketed threshold that selects k, < 0: none
  double log_trend_ = 0;
  double vol_ = 0;  // peak-hold of recent |log ratio|, sets the reach below (next_threshold)
};

}  // namespace exdyna::sparsifiers
