// Training checkpoints: one file per rank (its model, optimizer state, error-feedback residual,
// sparsifier state and position), written atomically (temp file + rename), plus a `latest` file
// naming the newest complete checkpoint, written by rank 0 after every rank has finished its file.
// A crash at any point leaves either the previous checkpoint or the new one, never half of one.
//
// Layout: DIR/step-<S>/rank-<r>.bin and DIR/latest (text: "step-<S>").
// All randomness of a run is a pure function of (seed, epoch, rank, step), so the step number is
// the complete RNG and data position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace exdyna::train {

struct CheckpointState {
  std::string fingerprint;  // run configuration; a resume with a different one is refused
  int rank = 0, world = 1;
  std::int64_t step = 0;          // optimizer steps done
  std::int64_t ef_iteration = 0;  // error feedback's iteration counter
  double elapsed_s = 0;           // training wall time before this checkpoint
  std::vector<float> params, momentum, residual, buffers;
  std::vector<std::byte> sparsifier_state;
};

// Writes path atomically (core::write_file_atomic: temporary, fsync, rename).
void save_checkpoint_file(const std::string& path, const CheckpointState& s);
// A checkpoint file's bytes around a payload: header, payload, SHA-256 trailer (what
// save_checkpoint_file writes; the fuzz target wraps its inputs with it to reach the field parser).
std::string framed_checkpoint(std::span<const std::byte> payload);

// Throws DataError "checkpoint PATH: REASON" when the file is missing, truncated, of another
// format version, or fails its checksums (a header checksum and a SHA-256 of the whole file: one
// flipped bit anywhere is refused). Format in checkpoint.cpp.
CheckpointState load_checkpoint_file(const std::string& path);

std::string checkpoint_step_dir(const std::string& dir, std::int64_t step);
std::string checkpoint_rank_file(const std::string& step_dir, int rank);
// Marks step_dir as the newest complete checkpoint of dir.
void mark_latest(const std::string& dir, const std::string& step_dir);
// Resolves a --resume argument: a checkpoint directory (follows `latest`), an output directory
// holding checkpoints/, or a step-<S> directory. Throws InvalidArgument naming the path.
std::string resolve_resume(const std::string& path);

}  // namespace exdyna::train
