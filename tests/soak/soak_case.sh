#!/usr/bin/env bash
# Soak: T iterations of `exdyna simulate` on 4 processes of one engine (gloo, or mpi
# under the launcher given after the iteration count). Passes when every rank's resident memory
# grew by less than 1 % from iteration min(1000, T/2) to the end, no rank holds more open file
# descriptors at the end than then, and the decisions digest equals an in-process run's.
# usage: soak_case.sh EXDYNA gloo|mpi ITERATIONS [LAUNCHER...]
set -euo pipefail
exdyna=$1 engine=$2 iters=$3
shift 3
args=(simulate --workers 4 --iterations "$iters" --n-grad 60000 --seed 3 --density 0.01
      --timeout 60)
out=$(mktemp)
trap 'rm -f "$out"' EXIT

start=$SECONDS
rc=0
if [ "$engine" = mpi ]; then
  "$@" "$exdyna" "${args[@]}" --backend mpi --resources >"$out" 2>&1 || rc=$?
else
  "$exdyna" "${args[@]}" --backend "$engine" --resources >"$out" 2>&1 || rc=$?
fi
if [ "$rc" -ne 0 ]; then
  tail -n 30 "$out"
  echo "FAIL: the $engine run exited $rc"
  exit 1
fi
echo "$engine run: $iters iterations in $((SECONDS - start)) s"
grep 'resources:' "$out" | sed 's/^\[rank 0\] //'

digest() { sed -n 's/^\(\[rank 0\] \)\{0,1\}decisions digest: \([0-9a-f]*\).*/\2/p'; }
got=$(digest <"$out")
want=$("$exdyna" "${args[@]}" --backend local | digest)
if [ -z "$got" ] || [ "$got" != "$want" ]; then
  echo "FAIL: decisions digest of the $engine run '$got' differs from the in-process run's '$want'"
  exit 1
fi
echo "decisions digest $got equals the in-process run's"

# "resources: rank R resident A MiB after iteration W, B MiB at the end (+G %); open
# descriptors F, E"
awk '
  /resources: rank/ {
    n++
    for (i = 1; i <= NF; i++) {
      if ($i == "rank") r = $(i + 1)
      if ($i == "(") g = $(i + 1)
      if ($i == "descriptors") { f0 = $(i + 1); f1 = $(i + 2) }
    }
    sub(/^\(/, "", g); sub(/,$/, "", f0)
    if (g + 0 >= 1.0) { printf "FAIL: rank %s resident memory grew by %s %%\n", r, g; bad = 1 }
    if (f1 + 0 > f0 + 0) { printf "FAIL: rank %s open descriptors %s -> %s\n", r, f0, f1; bad = 1 }
  }
  END {
    if (n != 4) { printf "FAIL: %d resources lines, expected 4\n", n; bad = 1 }
    exit bad
  }' <(sed 's/^\[rank 0\] //; s/(+/( /; s/(-/( -/' "$out")
echo "PASS: memory growth < 1 % and no descriptor leak on every rank"
