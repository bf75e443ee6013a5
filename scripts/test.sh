#!/usr/bin/env bash
# The tests, in two sizes.
#
#   scripts/test.sh         builds once (scripts/build.sh: nothing to do after the main command)
#                           and runs the build's whole CTest suite but the `long` soaks: unit,
#                           command line, multi-process engines, training, short soaks, compare,
#                           and the Python package's pytest suite against build/python.
#   scripts/test.sh --all   the same, then what needs other builds: the Python package installed
#                           as a user installs it (scripts/python-package.sh: a venv,
#                           `pip install --no-build-isolation .`, pytest), README.md's install
#                           block run as written in a fresh copy (scripts/readme-python-block.sh),
#                           the library alone (EXDYNA_MINIMAL) with its unit tests and the
#                           install test, the unit tests under AddressSanitizer and
#                           UndefinedBehaviorSanitizer, and the libFuzzer targets (clang; 60 s
#                           each, two at a time). `.ci/run` runs it.
#
# `ctest --test-dir build -L long` runs the 20,000-iteration soaks left out of both.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

all=0
case "${1:-}" in
  "") ;;
  --all) all=1 ;;
  *)
    echo "scripts/test.sh: unknown argument '$1'; expected nothing (the quick suite) or --all" >&2
    exit 2
    ;;
esac

bash scripts/build.sh
# One BLAS thread per process: the tests run several processes (and `--backend local` several
# worker threads) at once, and OpenBLAS's own threads spin while they wait, so on 2 cores a test
# with its default of one thread per core ran past its 300 s limit.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
# Multi-process tests mostly wait on each other; twice the cores keeps both cores busy.
ctest --test-dir build --output-on-failure -j "$((2 * jobs))" --timeout 900 -LE long

[ "$all" = 1 ] || exit 0

bash scripts/python-package.sh
bash scripts/readme-python-block.sh

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
