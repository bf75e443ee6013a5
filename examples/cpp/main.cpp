// The installed library from a user's side: ExDyna at d = 0.01 with error feedback, two ranks of
// the in-process group, one step. Exit 0 when every rank got the same positive number of selected
// elements and an update of the gradient's length.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <exdyna/exdyna.hpp>

int main() {
  namespace comm = exdyna::comm;
  namespace sp = exdyna::sparsifiers;
  constexpr int kWorld = 2;
  constexpr std::int64_t kNg = 1 << 16;

  sp::SparsifierConfig options;
  options.density = 0.01;
  const sp::Registry registry = sp::builtin_registry();

  std::vector<std::int64_t> k_total(kWorld, -1);
  comm::run_local(kWorld, [&](comm::Communicator& c) {
    sp::ErrorFeedback ef =
        sp::make_error_feedback("exdyna", options, kNg, c.size(), c.rank(), registry);
    std::vector<float> grad(static_cast<std::size_t>(kNg));
    for (std::int64_t i = 0; i < kNg; ++i)
      grad[static_cast<std::size_t>(i)] =
          static_cast<float>((i * 7919 + c.rank() * 104729) % 2001 - 1000) / 1000.0f;
    const sp::StepStats stats = ef.step(grad, c);
    k_total[static_cast<std::size_t>(c.rank())] = stats.k_total;
  });

  std::printf("exdyna consumer: k' = %lld of n_g = %lld (k = %lld)\n",
              static_cast<long long>(k_total[0]), static_cast<long long>(kNg),
              static_cast<long long>(options.density * kNg));
  return k_total[0] > 0 && k_total[0] == k_total[1] ? 0 : 1;
}
