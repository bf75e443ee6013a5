// The installed library over a real engine: ExDyna at d = 0.01 with error feedback, one rank per
// process over Gloo (exdyna::gloo), a few steps on a gradient that differs per rank. Every rank
// prints a digest of the averaged updates it applied; the update is the sum over ranks of what
// each selected, the same on every rank, so every rank must print the same digest.
//
// The ranks meet as torchrun starts PyTorch's: GlooConfig::from_env() reads MASTER_ADDR,
// MASTER_PORT, RANK and WORLD_SIZE, and EXDYNA_JOB_TOKEN, a secret of at least 16 characters every
// rank proves before the others talk to it. Two processes on one machine:
//
//   export MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 WORLD_SIZE=2
//   export EXDYNA_JOB_TOKEN=$(openssl rand -hex 16)
//   RANK=0 ./exdyna_two_process & RANK=1 ./exdyna_two_process; wait
//
// Without RANK, the same two ranks run as two threads of the in-process group instead; with two
// ranks the sums cannot depend on the order they are added in, so the digest is Gloo's too.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include <exdyna/exdyna.hpp>

namespace {

namespace comm = exdyna::comm;
namespace sp = exdyna::sparsifiers;

constexpr std::int64_t kNg = 1 << 16;
constexpr int kSteps = 5;

// This rank's gradient at step t: values in [-1, 1] that differ per rank and per step.
void fill_gradient(std::vector<float>& grad, int rank, int t) {
  for (std::size_t i = 0; i < grad.size(); ++i) {
    const auto h = (static_cast<std::int64_t>(i) * 7919 + rank * 104729 + t * 1299709) % 2001;
    grad[i] = static_cast<float>(h - 1000) / 1000.0f;
  }
}

// FNV-1a over the bytes of the updates: equal digests, bit-identical updates.
std::uint64_t digest(std::uint64_t h, std::span<const float> update) {
  for (const float v : update) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int b = 0; b < 4; ++b) h = (h ^ ((bits >> (8 * b)) & 0xffu)) * 1099511628211ull;
  }
  return h;
}

// One rank's run: the same configuration on every rank (checked), then kSteps steps.
void run_rank(comm::Communicator& c) {
  sp::SparsifierConfig options;
  options.density = 0.01;
  comm::Fingerprint fingerprint;
  fingerprint.add("sparsifier", "exdyna").add("options", options.fingerprint());
  comm::check_same_configuration(c, fingerprint);

  sp::ErrorFeedback ef =
      sp::make_error_feedback("exdyna", options, kNg, c.size(), c.rank(), sp::builtin_registry());
  std::vector<float> grad(static_cast<std::size_t>(kNg));
  std::uint64_t h = 14695981039346656037ull;
  std::int64_t k_total = 0;
  for (int t = 0; t < kSteps; ++t) {
    fill_gradient(grad, c.rank(), t);
    k_total += ef.step(grad, c).k_total;  // grad is now the averaged sparse update
    h = digest(h, grad);
  }
  std::printf("rank %d of %d (%.*s): %d steps, k' = %lld in all, update digest %016llx\n", c.rank(),
              c.size(), static_cast<int>(c.engine().size()), c.engine().data(), kSteps,
              static_cast<long long>(k_total), static_cast<unsigned long long>(h));
  std::fflush(stdout);
}

}  // namespace

int main() {
  try {
    if (std::getenv("RANK") == nullptr) {
      comm::run_local(2, run_rank);
      return 0;
    }
    comm::GlooConfig config = comm::GlooConfig::from_env();
    config.timeout = std::chrono::seconds(60);
    const std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(config);
    run_rank(*c);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exdyna_two_process: %s\n", e.what());
    return 1;
  }
}
