// Dense all-reduce: no sparsification, the reference every comparison needs. Sends all n_g
// values; with error feedback the residual stays zero.
#pragma once

#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"

namespace exdyna::sparsifiers {

class Dense final : public Sparsifier {
 public:
  explicit Dense(const SparsifierConfig& cfg) : cfg_(cfg) { cfg_.validate(); }
  std::string_view name() const override { return "dense"; }
  void step(std::span<const float> acc, comm::Communicator& comm, SparseResult& out,
            StepStats& stats) override;
  bool runs_on_device() const override { return cfg_.values == core::ValueFormat::kFp32; }
  void step_device(const float* acc, DeviceStep& device, comm::Communicator& comm,
                   StepStats& stats) override;
  std::string fingerprint() const override { return "dense;" + cfg_.fingerprint(); }
  std::vector<std::byte> save_state() const override { return {}; }
  void load_state(std::span<const std::byte>) override {}

 private:
  SparsifierConfig cfg_;
};

}  // namespace exdyna::sparsifiers
