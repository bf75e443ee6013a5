// SGD with momentum (Nesterov optional) and weight decay over one flat parameter buffer, a
// learning-rate schedule (linear warm-up, step decay) and global-norm gradient clipping.
// Torch-free: the trainer's parameters and gradients are views into flat float buffers, so the
// optimizer is a loop over floats — deterministic, and its state is one flat buffer to checkpoint.
// Semantics follow torch.optim.SGD (dampening 0): g += wd * p; buf = m * buf + g;
// g = nesterov ? g + m * buf : buf; p -= lr * g.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace exdyna::train {

struct SgdOptions {
  double lr = 0.05;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0;
  void validate() const;
};

class Sgd {
 public:
  Sgd(std::int64_t n, SgdOptions opt);
  void step(std::span<float> params, std::span<const float> grad, double lr);
  std::span<const float> momentum_buffer() const { return buf_; }
  std::span<float> mutable_momentum_buffer() { return buf_; }
  const SgdOptions& options() const { return opt_; }

 private:
  SgdOptions opt_;
  std::vector<float> buf_;
};

struct LrSchedule {
  double base_lr = 0.05;
  double warmup_epochs = 0;          // linear ramp from base/steps to base over this many epochs
  std::vector<double> decay_epochs;  // multiply by decay_factor at each of these epochs
  double decay_factor = 0.1;
  void validate() const;
  double at(std::int64_t step, std::int64_t steps_per_epoch) const;
};

// Scales grad so that its L2 norm is at most max_norm (no-op when max_norm <= 0). Returns the
// norm before clipping.
double clip_grad_norm(std::span<float> grad, double max_norm);

}  // namespace exdyna::train
