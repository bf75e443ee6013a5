#!/usr/bin/env bash
# Builds everything and runs every test: the full build's CTest suite (unit, multi-process engine
# and training tests), then the Python package installed with pip into .venv and its pytest suite
# (scripts/python-package.sh), then the library alone (EXDYNA_MINIMAL) with its unit tests and the
# install test, then the core unit tests again built with AddressSanitizer and
# UndefinedBehaviorSanitizer (no MPI, no libtorch), then the libFuzzer targets of tests/fuzz (clang;
# 60 s each, two at a time; skipped with a reason where clang or its fuzzer runtime is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash scripts/build.sh
# Label `long` (the 20,000-iteration soaks) is left out: `ctest --test-dir build -L long` runs it.
# Label `python` too: the same pytest suite runs next against the pip-installed package instead.
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900 -LE 'long|python'

# The Python package as a user installs it: a venv, `pip install --no-build-isolation .`, pytest.
bash scripts/python-package.sh

# The library alone, as on a machine with only a compiler and CMake (EXDYNA_MINIMAL: no MPI,
# libtorch, JSON, CLI11, pybind11 or CUDA): its unit tests, then the install test (cmake --install,
# then examples/cpp built against the installed tree with find_package(exdyna)).
cmake -S . -B build-minimal -G Ninja -DCMAKE_BUILD_TYPE=Release -DEXDYNA_MINIMAL=ON
cmake --build build-minimal -j "$jobs"
ctest --test-dir build-minimal --output-on-failure -j "$jobs" --timeout 900

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEXDYNA_SANITIZE=ON \
  -DEXDYNA_WITH_MPI=OFF -DEXDYNA_WITH_TORCH=OFF -DEXDYNA_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j "$jobs" --target exdyna_unit_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 900 -L unit

fuzz_skip=""
if ! command -v clang++ >/dev/null 2>&1; then
  fuzz_skip="clang++ not found (install clang)"
elif ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
  clang++ -x c++ -fsanitize=fuzzer,address - -o /dev/null 2>/dev/null; then
  fuzz_skip="clang++ cannot link -fsanitize=fuzzer (install libclang-rt-14-dev)"
fi
if [ -n "$fuzz_skip" ]; then
  echo "test.sh: fuzz targets skipped: $fuzz_skip"
else
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DEXDYNA_FUZZ=ON -DEXDYNA_BUILD_TESTS=OFF -DEXDYNA_WITH_MPI=OFF -DEXDYNA_WITH_TORCH=OFF \
    -DEXDYNA_WITH_PYTHON=OFF -DEXDYNA_BUILD_BENCHMARKS=OFF
  cmake --build build-fuzz -j "$jobs" --target exdyna_fuzz_all
  ctest --test-dir build-fuzz --output-on-failure -j 2 -L fuzz
fi
