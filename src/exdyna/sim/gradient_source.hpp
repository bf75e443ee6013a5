// Where simulated workers get their gradients: the synthetic generator or a recorded trace.
#pragma once

#include <cstdint>
#include <span>

namespace exdyna::sim {

class GradientSource {
 public:
  virtual ~GradientSource();
  virtual std::int64_t n_g() const = 0;
  // Iterations available; -1 when unbounded (synthetic).
  virtual std::int64_t iterations() const = 0;
  // Workers the source was made for (a trace fixes it; the synthetic generator takes any).
  virtual int workers() const = 0;
  // Writes worker w's gradient of iteration t into grad (size n_g). Safe to call concurrently for
  // different workers. Deterministic: the same (t, w) always gives the same values.
  virtual void fill(std::int64_t t, int worker, std::span<float> grad) = 0;
};

}  // namespace exdyna::sim
