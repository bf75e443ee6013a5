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
  // --momentum-correction keeps the velocity in error feedback and runs SGD without momentum:
  // the checkpoint's momentum slot holds it then.
  auto mb = w.ef.velocity().empty() ? w.sgd.momentum_buffer() : w.ef.velocity();
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

// "written by sparsifier topk, this run uses exdyna" for the first field that differs.
std::string first_difference(const std::string& theirs, const std::string& ours) {
  const auto a = comm::Fingerprint::parse(theirs).fields();
  const auto b = comm::Fingerprint::parse(ours).fields();
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string an = i < a.size() ? a[i].first : "(none)";
    const std::string bn = i < b.size() ? b[i].first : "(none)";
    if (an != bn) return detail::concat("it has field '", an, "' where this run has '", bn, "'");
    const auto& x = a[i].second;
    const auto& y = b[i].second;
    if (x == y) continue;
    if (an == "sparsifier")
      return detail::concat("written by sparsifier ", x, ", this run uses ", y);
    if (an == "n_g")
      return detail::concat("written for n_g = ", x, " parameters, this run has n_g = ", y);
    if (an == "model" || an == "dataset")
      return detail::concat("written for ", an, " ", x, ", this run has ", an, " ", y);
    return detail::concat("written with ", an, " '", x, "', this run has '", y, "'");
  }
  return "written for a different configuration (the fingerprints differ)";
}

// How many rank-<r>.bin files dir holds (for the message when this rank's file is missing).
int rank_files(const std::string& dir) {
  int n = 0;
  while (fs::exists(checkpoint_rank_file(dir, n))) ++n;
  return n;
}

// Loads and checks this rank's file and restores it into w. Changes nothing in any file.
ResumePoint restore_local(const std::string& dir, const std::string& fingerprint,
                          const WorkerState& w, int rank, int world) {
  const auto file = checkpoint_rank_file(dir, rank);
  if (!fs::exists(file)) {
    const int have = rank_files(dir);
    EXDYNA_CHECK_ARG(have == 0 || have > rank, "checkpoint ", file, ": written for ", have,
                     " ranks, this run has ", world);
  }
  auto s = load_checkpoint_file(file);
  EXDYNA_CHECK_ARG(s.world == world, "checkpoint ", file, ": written for ", s.world,
                   " ranks, this run has ", world);
  EXDYNA_CHECK_T(DataError, s.rank == rank, "checkpoint ", file, ": written by rank ", s.rank,
                 ", read by rank ", rank, " (files renamed?)");
  EXDYNA_CHECK_ARG(s.fingerprint == fingerprint, "checkpoint ", file, ": ",
                   first_difference(s.fingerprint, fingerprint));
  const auto n = static_cast<std::size_t>(w.model.n);
  EXDYNA_CHECK_T(
      DataError, s.params.size() == n && s.momentum.size() == n && s.residual.size() == n,
      "checkpoint ", file, ": holds vectors of ", s.params.size(), ", ", s.momentum.size(), " and ",
      s.residual.size(), " values; this model has n_g = ", n);
  w.ef.set_iteration(s.ef_iteration);  // first: it builds the sparsifier of the warm-up phase
  try {
    w.ef.sparsifier().load_state(s.sparsifier_state);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(detail::concat("checkpoint ", file, ": sparsifier state: ", e.what()));
  } catch (const DataError& e) {
    throw DataError(detail::concat("checkpoint ", file, ": sparsifier state: ", e.what()));
  }
  std::copy(s.params.begin(), s.params.end(), w.model.p_span().begin());
  std::copy(s.momentum.begin(), s.momentum.end(),
            (w.ef.velocity().empty() ? w.sgd.mutable_momentum_buffer() : w.ef.mutable_velocity())
                .begin());
  std::copy(s.residual.begin(), s.residual.end(), w.ef.mutable_residual().begin());
  w.model.set_buffers(s.buffers);
  return {s.step, s.elapsed_s};
}

// Collective: when any rank refused its file, every rank throws the first refusing rank's message
// (the same exception type), so no rank goes on into the training collectives alone.
void agree_on_refusal(comm::Communicator& comm, const std::string& mine, bool mine_is_data) {
  const int world = comm.size();
  const std::int64_t code = mine.empty() ? 0 : (mine_is_data ? 2 : 1);
  const std::int64_t own[2] = {code, static_cast<std::int64_t>(mine.size())};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(world));
  comm.allgather_counts(own, all);
  int first = -1;
  for (int r = 0; r < world && first < 0; ++r)
    if (all[2 * static_cast<std::size_t>(r)] != 0) first = r;
  if (first < 0) return;
  std::string msg = mine;
  msg.resize(static_cast<std::size_t>(all[2 * static_cast<std::size_t>(first) + 1]));
  comm.broadcast_values(std::span<char>(msg), first);
  if (first != comm.rank()) msg = detail::concat(msg, " (refused by rank ", first, ")");
  if (all[2 * static_cast<std::size_t>(first)] == 2) throw DataError(msg);
  throw InvalidArgument(msg);
}

}  // namespace

ResumePoint restore_worker_checkpoint(const std::string& resume, const std::string& fingerprint,
                                      const WorkerState& w, comm::Communicator& comm) {
  const auto dir = resolve_resume(resume);
  ResumePoint at;
  std::string refusal;
  bool data_error = false;
  try {
    at = restore_local(dir, fingerprint, w, comm.rank(), comm.size());
  } catch (const DataError& e) {
    refusal = e.what();
    data_error = true;
  } catch (const InvalidArgument& e) {
    refusal = e.what();
  }
  agree_on_refusal(comm, refusal, data_error);
  return at;
}

}  // namespace exdyna::train
