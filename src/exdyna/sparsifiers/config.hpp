// Typed configuration shared by every sparsifier, validated once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/core/half_float.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna_options.hpp"

namespace exdyna::sparsifiers {

struct SidcoOptions {
  int stages = 3;  // number of fitting stages of the multi-stage estimate
};

struct RandomKOptions {
  // Random-k draws iteration t's indices from (seed, t) alone, identically on every rank.
  std::uint64_t seed = 0;
};

struct DgcOptions {
  // DGC estimates its threshold from a sample of this fraction of the gradient (at least 64 / d
  // elements; dgc.hpp).
  double sample = 0.01;
};

struct OkTopkOptions {
  // Ok-Topk re-evaluates its local and global thresholds exactly every `period` iterations and
  // recomputes the regions' boundaries every `repartition` iterations (oktopk.hpp); 32 and 64 are
  // the values of the authors' published code.
  int period = 32;
  int repartition = 64;
};

// What error feedback does with a non-finite gradient element: kRaise refuses the step (DataError
// naming the element, before anything changes); kSkip passes the overflow on as a dense all-reduce
// would (fp16 AMP: GradScaler then skips the step on every rank): every rank learns it, every
// rank's update is NaN, and the residual, velocity and controller keep their state
// (non_finite_step.hpp).
enum class NonFinite { kRaise, kSkip };
const char* to_string(NonFinite v);
NonFinite parse_non_finite(std::string_view s);

// The convergence mechanisms around error feedback (error_feedback.hpp runs them; one file each:
// momentum_correction.hpp, local_clipping.hpp, step_clipping.hpp, density_warmup.hpp). All off by
// default; and what it does with a non-finite gradient.
struct ConvergenceOptions {
  double momentum_correction = 0;  // DGC's momentum m in [0, 1); 0: off
  double local_clip = 0;           // DGC's local clipping norm (> 0: on); each of N workers
                                   // clips its gradient to local_clip / sqrt(N)
  double step_clip = 0;            // the averaged update's L2 norm at most this (> 0: on), the
                                   // part clipped off dropped (step_clipping.hpp)
  std::int64_t warmup_steps = 0;   // density warm-up over this many steps; 0: off
  double warmup_start = 0.25;      // the warm-up's first density (1: dense), down to d
  NonFinite non_finite = NonFinite::kRaise;
};

struct SparsifierConfig {
  double density = 0.01;  // d in (0, 1]
  std::int64_t n_g = 0;   // gradient length
  int world_size = 1;
  int rank = 0;
  comm::GatherMode gather_mode = comm::GatherMode::kPadded;
  sparsifiers::ExDynaOptions exdyna;
  double hard_threshold = -1;  // < 0: 1 / (2 sqrt(k))
  SidcoOptions sidco;
  RandomKOptions randomk;
  DgcOptions dgc;
  OkTopkOptions oktopk;
  ConvergenceOptions convergence;
  // --values: the format of the values every sparsifier sends (core/half_float.hpp).
  core::ValueFormat values = core::ValueFormat::kFp32;

  // k = floor(d * n_g).
  std::int64_t k() const;
  // Throws InvalidArgument naming the field, the value and what was expected.
  void validate() const;
  std::string fingerprint() const;
};

}  // namespace exdyna::sparsifiers
