// The multi-process test driver. Runs one deterministic gradient fixture through every registered
// sparsifier, in both gather modes, on the engine its arguments select (in-process group, MPI under
// mpirun, Gloo through the local launcher), and writes one digest file per rank: per step the
// threshold (bits), per-worker counts, partitions, and FNV-1a hashes of the gathered indices, the
// summed values (bits) and the averaged update (bits). Every rank of every engine must write the
// same file; CTest compares them.
//
// Gradients are dyadic rationals m * 2^-e with |m| <= 1000 and e fixed per "layer", so residuals,
// sums over 4 workers and the mean (/4) are exact in float whatever order an engine sums in:
// bit-identical results across engines are then a property of the sparsifiers and engines, not of
// luck.
//
// It also checks the byte accounting of each step (exact mode: the index bytes equal the payload;
// padded mode: n * max k_i elements, f(t) as the paper's Eq. 5) and can inject faults:
//   --fault kill:R:S    rank R kills itself (SIGKILL) before step S
//   --fault stall:R:S   rank R stops calling collectives before step S (sleeps)
//   --mismatch R        rank R uses density 0.02 instead of 0.01 (refused at startup)
//   --stranger R        rank R runs with another EXDYNA_JOB_TOKEN (refused before the mesh)
//   --stranger R:none   rank R runs without EXDYNA_JOB_TOKEN
#include <signal.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "exdyna/comm/engines/runner.hpp"
#include "exdyna/comm/fingerprint.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/hash.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna_options.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/sparsifiers/oktopk.hpp"

namespace {

using namespace exdyna;

struct Args {
  std::string backend = "local";
  int workers = 4;
  double timeout_s = 60;
  std::string out_dir = ".";
  std::string tag = "run";
  int steps = 12;
  std::int64_t n_g = 10007;  // prime: blocks do not divide it
  double density = 0.01;
  std::string fault;
  int mismatch_rank = -1;
  std::string stranger;
  std::string only;                                     // run only this sparsifier
  core::ValueFormat values = core::ValueFormat::kFp32;  // --values
};

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Worker w's gradient at step t: m * 2^-(14 + layer), |m| <= 1000, 8 layers; a shared part plus a
// per-worker part, and a few large entries so every sparsifier has clear winners.
void fill_grad(std::int64_t t, int w, std::span<float> g) {
  const auto n = static_cast<std::int64_t>(g.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const int layer = static_cast<int>(i * 8 / n);
    const auto hs =
        mix(static_cast<std::uint64_t>(t) * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(i));
    const auto hw = mix(hs ^ (static_cast<std::uint64_t>(w + 1) * 0x632be59bd9b4e019ull));
    std::int64_t m =
        static_cast<std::int64_t>(hs % 601) - 300 + static_cast<std::int64_t>(hw % 401) - 200;
    if (hw % 97 == 0) m = m >= 0 ? 1000 : -1000;
    g[static_cast<std::size_t>(i)] = std::ldexp(static_cast<float>(m), -(14 + layer));
  }
}

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "engine_fixture: " << why << "\n";
  std::exit(64);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value for " + k);
      return argv[++i];
    };
    if (k == "--backend")
      a.backend = val();
    else if (k == "--workers")
      a.workers = std::stoi(val());
    else if (k == "--timeout")
      a.timeout_s = std::stod(val());
    else if (k == "--out")
      a.out_dir = val();
    else if (k == "--tag")
      a.tag = val();
    else if (k == "--steps")
      a.steps = std::stoi(val());
    else if (k == "--n-grad")
      a.n_g = std::stoll(val());
    else if (k == "--fault")
      a.fault = val();
    else if (k == "--mismatch")
      a.mismatch_rank = std::stoi(val());
    else if (k == "--stranger")
      a.stranger = val();
    else if (k == "--only")
      a.only = val();
    else if (k == "--values")
      a.values = core::parse_value_format(val());
    else
      usage("unknown argument " + k);
  }
  return a;
}

struct Fault {
  std::string kind;
  int rank = -1;
  int step = -1;
};

Fault parse_fault(const std::string& s) {
  Fault f;
  if (s.empty()) return f;
  const auto c1 = s.find(':'), c2 = s.rfind(':');
  if (c1 == std::string::npos || c1 == c2)
    usage("--fault expects kill:RANK:STEP or stall:RANK:STEP");
  f.kind = s.substr(0, c1);
  f.rank = std::stoi(s.substr(c1 + 1, c2 - c1 - 1));
  f.step = std::stoi(s.substr(c2 + 1));
  if (f.kind != "kill" && f.kind != "stall") usage("--fault kind must be kill or stall");
  return f;
}

void run_rank(const Args& a, comm::Communicator& c) {
  const Fault fault = parse_fault(a.fault);
  const int r = c.rank(), n = c.size();
  const double density = r == a.mismatch_rank ? 0.02 : a.density;
  auto reg = sparsifiers::builtin_registry();

  comm::Fingerprint fp;
  fp.add("exdyna_version", EXDYNA_VERSION).add("engine", std::string(c.engine()));
  fp.add("world_size", std::to_string(n)).add("n_g", std::to_string(a.n_g));
  fp.add("steps", std::to_string(a.steps));
  std::ostringstream d;
  d.precision(17);
  d << density;
  fp.add("density", d.str());
  fp.add("values", core::to_string(a.values));
  std::string names;
  for (const auto& s : reg.names()) names += s + ",";
  fp.add("sparsifiers", names);
  comm::check_same_configuration(c, fp);

  // Bit-identical sums on every rank for general floats (order-dependent values, unlike the
  // fixture's dyadic ones), at a small and a large size (engines switch algorithms by size).
  for (std::size_t len : {std::size_t{1000}, std::size_t{1} << 20}) {
    std::vector<float> v(len);
    for (std::size_t i = 0; i < len; ++i)
      v[i] = static_cast<float>(
                 static_cast<double>(mix(i * 31 + static_cast<std::uint64_t>(r)) % 2000001) / 1e6 -
                 1.0) /
             3.0f;
    c.allreduce_sum(std::span<float>(v));
    const auto h = static_cast<std::int64_t>(core::fnv1a(v.data(), v.size() * sizeof(float)));
    std::vector<std::int64_t> all(static_cast<std::size_t>(n));
    c.allgather_counts(std::span<const std::int64_t>(&h, 1), all);
    for (int q = 0; q < n; ++q)
      EXDYNA_CHECK(all[static_cast<std::size_t>(q)] == h, "allreduce_sum of ", len,
                   " general floats differs between rank ", r, " and rank ", q);
  }

  std::ostringstream out;
  std::vector<float> grad(static_cast<std::size_t>(a.n_g));
  std::int64_t global_step = 0;
  // Every sparsifier with its defaults, and exdyna with each of its controllers and exact
  // balance (their decisions come from gathered ladders: every engine must agree on them too).
  struct Variant {
    std::string name, label;
    sparsifiers::Controller controller = sparsifiers::Controller::kPaper;
    sparsifiers::Balance balance = sparsifiers::Balance::kPaper;
    double worker_cap = 0;
    // --fuse off keeps every engine's bytes alike (auto chooses from measured times); a variant
    // with --fuse on names the --fuse off variant whose decisions it must repeat step by step.
    sparsifiers::Fuse fuse = sparsifiers::Fuse::kOff;
    std::string same_as;
  };
  std::vector<Variant> variants;
  const auto add = [&variants](std::string label, sparsifiers::Controller c, sparsifiers::Balance b,
                               double cap = 0, sparsifiers::Fuse fuse = sparsifiers::Fuse::kOff,
                               std::string same_as = {}) {
    variants.push_back({"exdyna", std::move(label), c, b, cap, fuse, std::move(same_as)});
  };
  using sparsifiers::Balance;
  using sparsifiers::Controller;
  using sparsifiers::Fuse;
  for (const auto& name : reg.names())
    variants.push_back({name, name, Controller::kPaper, Balance::kPaper, 0, Fuse::kOff, {}});
  add("exdyna/histogram/exact", Controller::kHistogram, Balance::kExact);
  add("exdyna/exact/paper", Controller::kExact, Balance::kPaper);
  add("exdyna/exact/exact", Controller::kExact, Balance::kExact);
  const double auto_cap = sparsifiers::ExDynaOptions::kAutoCap;
  add("exdyna/exact/exact/cap-auto", Controller::kExact, Balance::kExact, auto_cap);
  add("exdyna/exact/exact/cap-auto/fused", Controller::kExact, Balance::kExact, auto_cap, Fuse::kOn,
      "exdyna/exact/exact/cap-auto");
  add("exdyna/exact/paper/cap-3", Controller::kExact, Balance::kPaper, 3.0);
  add("exdyna/exact/paper/cap-3/fused", Controller::kExact, Balance::kPaper, 3.0, Fuse::kOn,
      "exdyna/exact/paper/cap-3");
  // The decisions of each --fuse off variant's steps (the digest line up to its bytes), by
  // variant, gather mode and step.
  std::map<std::string, std::string> decisions;
  int fused_steps = 0;
  for (const auto& v : variants) {
    const std::string& name = v.label;
    if (!a.only.empty() && v.name != a.only) continue;
    for (auto mode : {comm::GatherMode::kPadded, comm::GatherMode::kExact}) {
      sparsifiers::SparsifierConfig cfg;
      cfg.density = density;
      cfg.gather_mode = mode;
      cfg.values = a.values;
      cfg.exdyna.controller = v.controller;
      cfg.exdyna.balance = v.balance;
      cfg.exdyna.worker_cap = v.worker_cap;
      cfg.exdyna.fuse = v.fuse;
      auto ef = sparsifiers::make_error_feedback(v.name, cfg, a.n_g, n, r, reg);
      for (int t = 0; t < a.steps; ++t, ++global_step) {
        if (fault.rank == r && fault.step == global_step) {
          std::fprintf(stderr, "engine_fixture: rank %d injecting fault '%s' before step %lld\n", r,
                       fault.kind.c_str(), static_cast<long long>(global_step));
          std::fflush(stderr);
          if (fault.kind == "kill") ::raise(SIGKILL);
          std::this_thread::sleep_for(std::chrono::seconds(600));  // stops calling collectives
        }
        fill_grad(t, r, grad);
        const auto st = ef.step(grad, c);
        const auto& res = ef.last_result();
        // Byte accounting: exact sends the payload only; padded charges n * max k_i (Eq. 5).
        // Ok-Topk gathers (index, value) records, and on its re-evaluation steps (t mod 32 = 0)
        // every reduced entry rather than the k_i it reports.
        const bool oktopk = v.name == "oktopk";
        const bool v16 = a.values != core::ValueFormat::kFp32;
        // (The fused all-gather sends each worker's list padded to the cap, with the counts.)
        EXDYNA_CHECK(!st.fused || st.bytes.collectives == 2, name, " step ", t, ": fused in ",
                     st.bytes.collectives, " collectives; expected 2");
        fused_steps += static_cast<int>(st.fused);
        if (st.bytes.allgather_indices > 0 && !st.k_per_worker.empty() &&
            !(oktopk && t % 32 == 0) && !st.fused) {
          std::int64_t mx = 0, sum = 0;
          for (auto k : st.k_per_worker) {
            mx = std::max(mx, k);
            sum += k;
          }
          const std::size_t elem = !oktopk ? sizeof(sparsifiers::Index)
                                   : v16   ? sizeof(sparsifiers::OkTopkRecord16)
                                           : sizeof(sparsifiers::OkTopkRecord32);
          if (mode == comm::GatherMode::kExact) {
            EXDYNA_CHECK(st.bytes.allgather_indices == static_cast<std::uint64_t>(sum) * elem &&
                             st.bytes.padded_elements == 0,
                         name, " exact step ", t, ": index bytes ", st.bytes.allgather_indices,
                         " != payload ", sum * elem, " or padding ", st.bytes.padded_elements,
                         " != 0");
          } else {
            EXDYNA_CHECK(st.bytes.allgather_indices == static_cast<std::uint64_t>(n * mx) * elem &&
                             st.bytes.padded_elements == static_cast<std::uint64_t>(n * mx - sum),
                         name, " padded step ", t, ": index bytes ", st.bytes.allgather_indices,
                         " != n*max*4 ", n * mx * static_cast<std::int64_t>(elem));
            const double f =
                static_cast<double>(st.bytes.allgather_indices) / static_cast<double>(sum * elem);
            EXDYNA_CHECK(std::abs(f - st.f_t) < 1e-12, name, " padded step ", t,
                         ": bytes give f(t) = ", f, " but stats say ", st.f_t);
          }
        }
        // 16-bit values: 2 bytes each on the wire, on every engine (Ok-Topk's travel in its
        // records, checked above).
        EXDYNA_CHECK(!v16 || oktopk || st.bytes.allreduce == res.values.size() * 2, name, " step ",
                     t, ": 16-bit value bytes ", st.bytes.allreduce, " != 2 * ", res.values.size());
        const auto val_hash = core::fnv1a(res.values.data(), res.values.size() * sizeof(float));
        const auto upd_hash = core::fnv1a(grad.data(), grad.size() * sizeof(float));
        if (v16) {
          // The 16-bit partial sums round in the engine's reduction order, so the summed values
          // may differ between engines (not between ranks: checked here). The decisions (counts,
          // thresholds, indices) depend only on each rank's own residual, acc - round(acc), and
          // must agree across engines: they go into the digest, the values do not.
          const std::int64_t h[2] = {static_cast<std::int64_t>(val_hash),
                                     static_cast<std::int64_t>(upd_hash)};
          std::vector<std::int64_t> all(static_cast<std::size_t>(2 * n));
          c.allgather_counts(std::span<const std::int64_t>(h, 2), all);
          for (int q = 0; q < n; ++q)
            EXDYNA_CHECK(all[static_cast<std::size_t>(2 * q)] == h[0] &&
                             all[static_cast<std::size_t>(2 * q + 1)] == h[1],
                         name, " step ", t, ": 16-bit values differ between rank ", r, " and rank ",
                         q);
        }
        std::ostringstream line;
        line << " thr=" << std::bit_cast<std::uint64_t>(st.threshold) << " k=";
        for (auto k : st.k_per_worker) line << k << ',';
        line << " alloc=";
        for (auto x : st.alloc_per_worker) line << x << ',';
        line << " blocks=";
        for (auto x : st.blocks_per_partition) line << x << ',';
        line << " dense=" << res.dense << " ni=" << res.indices.size()
             << " nv=" << res.values.size();
        line << " idx=" << std::hex
             << core::fnv1a(res.indices.data(), res.indices.size() * sizeof(res.indices[0]))
             << " val=" << (v16 ? 0 : val_hash) << " upd=" << (v16 ? 0 : upd_hash) << std::dec;
        const std::string step_key = std::string(comm::to_string(mode)) + ' ' + std::to_string(t);
        if (v.same_as.empty()) {
          decisions[name + ' ' + step_key] = line.str();
        } else {
          const auto it = decisions.find(v.same_as + ' ' + step_key);
          EXDYNA_CHECK(it != decisions.end() && it->second == line.str(), name, ' ', step_key,
                       ": the fused all-gather's decisions differ from ", v.same_as, "'s:\n",
                       line.str(), "\n", it == decisions.end() ? "(none)" : it->second);
        }
        out << name << ' ' << step_key << line.str() << " agi=" << st.bytes.allgather_indices
            << " pad=" << st.bytes.padded_elements << " fused=" << st.fused << '\n';
      }
    }
  }
  EXDYNA_CHECK(!a.only.empty() || fused_steps > 0,
               "no step took the fused all-gather in the --fuse on variants");
  const std::string path = a.out_dir + "/digest_" + a.tag + "_r" + std::to_string(r) + ".txt";
  std::ofstream f(path);
  f << out.str();
  EXDYNA_CHECK(f.good(), "cannot write ", path);
  if (r == 0)
    std::printf("engine_fixture: %s: %lld steps on %d ranks (%s), digests in %s\n", a.tag.c_str(),
                static_cast<long long>(global_step), n, std::string(c.engine()).c_str(),
                a.out_dir.c_str());
}

}  // namespace

// In the worker whose RANK the launcher set to --stranger's rank: swap or drop the job token.
void become_stranger(const std::string& spec) {
  const char* rank = std::getenv("RANK");
  if (spec.empty() || !rank) return;
  const auto colon = spec.find(':');
  if (std::stoi(spec.substr(0, colon)) != std::stoi(rank)) return;
  if (colon != std::string::npos && spec.substr(colon + 1) == "none")
    ::unsetenv("EXDYNA_JOB_TOKEN");
  else
    ::setenv("EXDYNA_JOB_TOKEN", "a-stranger-who-guessed-the-port", 1);
}

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    become_stranger(a.stranger);
    comm::RunOptions o;
    o.backend = comm::parse_backend(a.backend);
    o.workers = a.workers;
    o.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.timeout_s * 1000));
    o.all_ranks_output = false;
    return comm::run_on_engine(o, [&](comm::Communicator& c) { run_rank(a, c); });
  } catch (const std::exception& e) {
    std::cerr << "engine_fixture: error: " << e.what() << "\n";
    return 2;
  }
}
