// A training worker's checkpoint: what it captures into a CheckpointState (checkpoint.hpp: the
// file format) and restores from one. Included only by torch translation units of the train
// layer.
#pragma once

#include <cstdint>
#include <string>

#include "exdyna/comm/communicator.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/train/flat_model.hpp"
#include "exdyna/train/optimizer.hpp"
#include "exdyna/train/trainer.hpp"

namespace exdyna::train {

// The parts of a worker's state that a checkpoint holds.
struct WorkerState {
  FlatModel& model;
  Sgd& sgd;
  sparsifiers::ErrorFeedback& ef;
};

// Where a run's checkpoints go: --checkpoint-dir, else OUT/checkpoints ("" without --out).
std::string checkpoint_dir(const TrainOptions& opts);

// Collective. Writes this rank's file of the checkpoint after `step` into dir; once every rank's
// file is complete (barrier), rank 0 marks it `latest`.
void save_worker_checkpoint(const std::string& dir, std::int64_t step, double elapsed_s,
                            const std::string& fingerprint, const WorkerState& w,
                            comm::Communicator& comm);

// Where a resumed run continues.
struct ResumePoint {
  std::int64_t step = 0;
  double elapsed_s = 0;  // training wall time before the checkpoint
};

// Collective. Loads this rank's file of the checkpoint that `resume` names (checkpoint.hpp:
// resolve_resume) into w. Throws "checkpoint FILE: REASON" on every rank when any rank refuses
// its file: InvalidArgument when it was written by another number of ranks or for another
// configuration (naming the first differing field: sparsifier, its options, model, n_g...),
// DataError when it is truncated, corrupt, of another format version or its vectors do not fit.
// Never writes: a refused resume leaves the checkpoint as it was.
ResumePoint restore_worker_checkpoint(const std::string& resume, const std::string& fingerprint,
                                      const WorkerState& w, comm::Communicator& comm);

}  // namespace exdyna::train
