// Shared by the libFuzzer targets: a scratch directory private to this fuzzer process (readers
// that only take a path get the input written there), and the rule that decides what a finding
// is. A reader may refuse any input with an exdyna::Error subclass; every other exception escapes
// LLVMFuzzerTestOneInput, which libFuzzer reports as a crash (as it does sanitizer reports,
// timeouts and allocations above -malloc_limit_mb).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "exdyna/core/error.hpp"

namespace exdyna::fuzz {

// mkdtemp under $TMPDIR (or /tmp), removed when the process exits normally. Two fuzzers running
// side by side get different directories.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/exdyna-fuzz-XXXXXX";
    if (!mkdtemp(templ.data())) std::abort();
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return std::filesystem::path(templ);
  }();
  return dir;
}

inline void write_bytes(const std::filesystem::path& p, const std::uint8_t* data, std::size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) std::abort();  // the scratch directory is ours: failing to write it is not a finding
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t n) {
  return {reinterpret_cast<const char*>(data), n};
}

// Runs f; an exdyna::Error is an expected refusal of a bad input.
template <class F>
void refuse_only_with_our_errors(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace exdyna::fuzz
