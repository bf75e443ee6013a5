#!/usr/bin/env bash
# Builds everything and runs every test: the full build's CTest suite (unit, multi-process engine
# and training tests), then the core unit tests again built with AddressSanitizer and
# UndefinedBehaviorSanitizer (no MPI, no libtorch).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash scripts/build.sh
# Label `long` (the 20,000-iteration soaks) is left out: `ctest --test-dir build -L long` runs it.
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900 -LE long

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEXDYNA_SANITIZE=ON \
  -DEXDYNA_WITH_MPI=OFF -DEXDYNA_WITH_TORCH=OFF -DEXDYNA_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j "$jobs" --target exdyna_unit_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 900 -L unit
