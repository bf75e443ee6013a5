#include "exdyna/train/train_checkpoint.hpp"

#include <algorithm>
#include <filesystem>

#include "exdyna/comm/fingerprint.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/train/checkpoint.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;

std::string checkpoint_dir(const TrainOptions& opts) {
  if (!opts.checkpoint_dir.empty()) return opts.checkpoint_dir;
  return opts.out_dir.empty() ? std::string() : (fs::path(opts.out_dir) / "checkpoints").string();
}

void save_worker_checkpoint(const std::string& dir, std::int64_t step, double elapsed_s,
                            const std::string& fingerprint, const WorkerState& w,
                            comm::Communicator& comm) {
  const int rank = comm.rank();
  CheckpointState s;
  s.fingerprint = fingerprint;
  s.rank = rank;
  s.world = comm.size();
  s.step = step;
  s.ef_iteration = w.ef.iteration();
  s.elapsed_s = elapsed_s;
  auto p = w.model.p_span();
  s.params.assign(p.begin(), p.end());
  auto mb = w.sgd.momentum_buffer();
  s.momentum.assign(mb.begin(), mb.end());
  auto rs = w.ef.residual();
  s.residual.assign(rs.begin(), rs.end());
  s.buffers = w.model.get_buffers();
  s.sparsifier_state = w.ef.sparsifier().save_state();
  const auto sd = checkpoint_step_dir(dir, step);
  save_checkpoint_file(checkpoint_rank_file(sd, rank), s);
  comm.barrier();  // every rank's file is complete before `latest` names the checkpoint
  if (rank == 0) mark_latest(dir, sd);
}

namespace {

// "batch_size is '16' there but '8' in this run" for the first field that differs.
std::string first_difference(const std::string& theirs, const std::string& ours) {
  const auto a = comm::Fingerprint::parse(theirs).fields();
  const auto b = comm::Fingerprint::parse(ours).fields();
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string an = i < a.size() ? a[i].first : "(none)";
    const std::string bn = i < b.size() ? b[i].first : "(none)";
    if (an != bn) return detail::concat("it has field '", an, "' where this run has '", bn, "'");
    if (a[i].second != b[i].second)
      return detail::concat(an, " is '", a[i].second, "' there but '", b[i].second,
                            "' in this run");
  }
  return "the fingerprints differ";
}

}  // namespace

ResumePoint restore_worker_checkpoint(const std::string& resume, const std::string& fingerprint,
                                      const WorkerState& w, comm::Communicator& comm) {
  const int world = comm.size(), rank = comm.rank();
  const auto n = w.model.n;
  const auto dir = resolve_resume(resume);
  auto s = load_checkpoint_file(checkpoint_rank_file(dir, rank));
  EXDYNA_CHECK_ARG(s.world == world && s.rank == rank, "checkpoint ", dir, " was written by ",
                   s.world, " workers; this run has ", world);
  EXDYNA_CHECK_ARG(
      s.fingerprint == fingerprint, "checkpoint ", dir,
      " belongs to a different configuration: ", first_difference(s.fingerprint, fingerprint));
  EXDYNA_CHECK_T(DataError,
                 s.params.size() == static_cast<std::size_t>(n) &&
                     s.momentum.size() == s.params.size() && s.residual.size() == s.params.size(),
                 "checkpoint ", dir, " holds vectors of the wrong length for n_g = ", n);
  std::copy(s.params.begin(), s.params.end(), w.model.p_span().begin());
  std::copy(s.momentum.begin(), s.momentum.end(), w.sgd.mutable_momentum_buffer().begin());
  std::copy(s.residual.begin(), s.residual.end(), w.ef.mutable_residual().begin());
  w.model.set_buffers(s.buffers);
  w.ef.sparsifier().load_state(s.sparsifier_state);
  w.ef.set_iteration(s.ef_iteration);
  return {s.step, s.elapsed_s};
}

}  // namespace exdyna::train
