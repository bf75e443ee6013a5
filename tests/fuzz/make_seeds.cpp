// Writes the seed corpora of the fuzz targets with the project's own writers, so seeds are what
// the tool produces: make_seeds OUT_DIR fills OUT_DIR/<target>/ (checked in as corpus/<target>/).
// A few valid files per format plus edge cases (empty sections, extra keys, tiny sizes).
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "exdyna/comm/local_group.hpp"
#include "exdyna/sim/synthetic_source.hpp"
#include "exdyna/sim/trace_source.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/train/checkpoint.hpp"
#include "exdyna/train/idx.hpp"
#include "sparsifier_state_fuzz.hpp"

namespace fs = std::filesystem;
using namespace exdyna;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void put(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << bytes;
}

std::vector<std::uint8_t> ramp(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 37);
  return v;
}

void idx_seeds(const fs::path& out) {
  fs::create_directories(out);
  train::write_idx_gz((out / "images3d.gz").string(), {3, 4, 4}, ramp(48));
  train::write_idx_gz((out / "labels1d.gz").string(), {5}, {0, 1, 2, 9, 4});
  train::write_idx_gz((out / "empty.gz").string(), {0}, {});
  // Plain (not gzip) 2-D and 4-D files: zlib reads them as they are.
  std::string plain2{'\0', '\0', '\x08', '\x02', 0, 0, 0, 2, 0, 0, 0, 3};
  for (auto b : ramp(6)) plain2 += static_cast<char>(b);
  put(out / "plain2d.idx", plain2);
  std::string plain4{'\0', '\0', '\x08', '\x04'};
  for (int i = 0; i < 4; ++i) plain4 += std::string{0, 0, 0, 1};
  put(out / "plain4d.idx", plain4 + '\x07');
}

void cifar_seeds(const fs::path& out) {
  auto rec = [](int label_bytes, std::uint8_t label) {
    std::string r(static_cast<std::size_t>(label_bytes), static_cast<char>(label % 20));
    r.back() = static_cast<char>(label);
    for (auto b : ramp(3072)) r += static_cast<char>(b);
    return r;
  };
  put(out / "cifar10-one.bin", rec(1, 3));
  put(out / "cifar10-two.bin", rec(1, 0) + rec(1, 9));
  put(out / "cifar100-one.bin", rec(2, 42));
  put(out / "cifar100-two.bin", rec(2, 99) + rec(2, 0));
}

void text_seeds(const fs::path& out) {
  using namespace std::string_literals;
  put(out / "small", "the cat sat\non the mat\n\n\0the dog sat\n\0a cat , on a mat .\n"s);
  put(out / "wikitext", " = Heading = \n\n the <unk> of 1 @,@ 000 people .\n\0 = B = \n\0\n"s);
  put(out / "punct", "Hello, World! It's A-OK (really); \"quoted\" \xc3\xa9t\xc3\xa9\r\n\0\0x"s);
  put(out / "train-only", "one two three\nfour\n"s);
}

void trace_seeds(const fs::path& out) {
  const auto tmp = out / ".tmp-trace";
  fs::remove_all(tmp);
  sim::TraceWriter w(tmp, 3, 2);
  for (int i = 0; i < 4; ++i) w.append(std::vector<float>{0.5f * i, -1.f, 3.25f});
  w.finish();
  put(out / "written", slurp(tmp / sim::kTraceMetaFile) + '\0' + slurp(tmp / sim::kTraceDataFile));
  fs::remove_all(tmp);
  put(out / "extra-keys",
      std::string("{\"n_g\": 2, \"workers\": 1, \"iterations\": 1, \"note\": [1, {\"x\": null}]}") +
          '\0' + std::string(8, '\x3f'));
  put(out / "meta-only", "{\"n_g\": 4294967295, \"workers\": 65536, \"iterations\": 1}");
  put(out / "negative", std::string("{\"n_g\": -1, \"workers\": 1.5, \"iterations\": 1e3}") + '\0');
}

void checkpoint_seeds(const fs::path& out) {
  train::CheckpointState s;
  s.fingerprint = "model=mlp;sparsifier=topk;density=0.01";
  s.rank = 1;
  s.world = 2;
  s.step = 42;
  s.ef_iteration = 42;
  s.elapsed_s = 1.5;
  s.params = {1, 2, 3, 4, 5};
  s.momentum = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  s.residual = {0, 0, 1e-3f, 0, -2};
  s.buffers = {7, 8};
  s.sparsifier_state = {std::byte{1}, std::byte{2}, std::byte{3}};
  const auto tmp = out / ".tmp-ckpt";
  fs::create_directories(out);
  train::save_checkpoint_file(tmp.string(), s);
  const auto file = slurp(tmp);
  fs::remove(tmp);
  put(out / "raw-file", std::string(1, '\0') + file);
  // The payload alone: the file less its 32-byte header and 32-byte SHA-256 trailer.
  put(out / "payload", std::string(1, '\1') + file.substr(32, file.size() - 64));
  put(out / "payload-empty-state",
      std::string(1, '\1') + std::string(8 + 4 + 4 + 24, '\0') + std::string(5 * 8, '\0'));
}

void sparsifier_seeds(const fs::path& out) {
  const auto registry = sparsifiers::builtin_registry();
  const auto names = registry.names();
  comm::LocalGroup group(1);
  const auto comm = group.communicator(0);
  fs::create_directories(out);
  for (int c = 0; c < fuzz::kStateFuzzControllers; ++c) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (c > 0 && names[i] != "exdyna") continue;  // the controller matters to exdyna only
      auto sp = registry.make(names[i], fuzz::state_fuzz_config(c));
      const auto fresh = sp->save_state();
      sparsifiers::SparseResult res;
      sparsifiers::StepStats st;
      for (int t = 0; t < 3; ++t) sp->step(fuzz::state_fuzz_gradient(t), *comm, res, st);
      const auto stepped = sp->save_state();
      for (const auto* state : {&fresh, &stepped}) {
        std::string bytes = names[i] + '\0' + static_cast<char>(c);
        bytes.append(reinterpret_cast<const char*>(state->data()), state->size());
        put(out / (names[i] + "-c" + std::to_string(c) + (state == &fresh ? "-fresh" : "-stepped")),
            bytes);
      }
    }
  }
}

// ladder_cut_fuzz: 4 parameter bytes (mantissa bits, rungs - 2, the lowest rung's exponent and
// the share to keep), then floats: a synthetic gradient on the default ladder (16 rungs per
// octave) and on the cold one (one per octave), and the special values.
void ladder_cut_seeds(const fs::path& out) {
  sim::SyntheticOptions o;
  o.n_g = 4096;
  o.layers = 4;
  sim::SyntheticSource src(o);
  std::vector<float> g(4096);
  src.fill(0, 0, g);
  const auto seed = [&](const std::string& name, std::string params, const std::vector<float>& v) {
    params.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    put(out / name, params);
  };
  seed("synthetic-m4", std::string{'\x04', '\x7f', '\x0b', '\x5b'}, g);
  seed("synthetic-cold", std::string{'\x00', '\x7f', '\x0b', '\x0c'}, g);
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> special{std::numeric_limits<float>::quiet_NaN(),  inf,   -inf,    -0.0f, 0.0f,
                             std::numeric_limits<float>::denorm_min(), 1e30f, -1e-30f, 3.0f};
  for (int i = 0; i < 64; ++i) special.push_back(static_cast<float>(i % 7) * 0.125f);
  seed("special", std::string{'\x07', '\x00', '\x14', '\xff'}, special);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds OUT_DIR\n";
    return 2;
  }
  const fs::path out = argv[1];
  idx_seeds(out / "idx");
  cifar_seeds(out / "cifar");
  text_seeds(out / "text");
  trace_seeds(out / "trace");
  checkpoint_seeds(out / "checkpoint");
  sparsifier_seeds(out / "sparsifier_state");
  ladder_cut_seeds(out / "ladder_cut");
  return 0;
}
