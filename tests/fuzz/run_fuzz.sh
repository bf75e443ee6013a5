#!/usr/bin/env bash
# One CTest fuzz run: copies the checked-in seed corpus to a scratch corpus in the build tree (the
# fuzzer adds what it finds there, never to the repository) and runs the target on it.
# Usage: run_fuzz.sh FUZZER SEED_DIR WORK_DIR SECONDS
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 secs=$4
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp -r "$seeds"/. "$work/corpus/"
# The targets write each input to a scratch file: keep that in memory where /dev/shm exists.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
# -timeout: one input taking longer is a hang (30 s, not less: on a loaded machine a 12 s stall
# inside ASan's madvise was once reported as a hang at 10 s). -rss_limit_mb also bounds a single
# allocation (-malloc_limit_mb defaults to it), so a length field asking for gigabytes is a finding.
exec "$fuzzer" -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus"
