#!/usr/bin/env bash
# Kill-then-resume through the command line: a run is killed with SIGKILL once it has written a
# checkpoint, resumed from `latest`, and must end with parameters bit-identical (summary.json's
# params_fnv1a) to an uninterrupted run of the same configuration.
set -euo pipefail
exe="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --dataset synthetic --model tiny --backend local --workers 2 --epochs 15 --batch-size 16
      --density 0.05 --no-progress --no-plots)
hash_of() { grep -o '"params_fnv1a": "[0-9a-f]*"' "$1/summary.json" | cut -d'"' -f4; }

"$exe" "${args[@]}" --out "$dir/full" > /dev/null
"$exe" "${args[@]}" --out "$dir/killed" --checkpoint-every 20 > /dev/null &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$dir/killed/checkpoints/latest" ] && break
  kill -0 "$pid" 2> /dev/null || break
  sleep 0.05
done
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
[ -f "$dir/killed/checkpoints/latest" ] || { echo "no checkpoint was written"; exit 1; }
echo "killed; resuming from $(cat "$dir/killed/checkpoints/latest")"
"$exe" "${args[@]}" --out "$dir/resumed" --resume "$dir/killed" > /dev/null
a=$(hash_of "$dir/full")
b=$(hash_of "$dir/resumed")
echo "uninterrupted $a, resumed $b"
[ -n "$a" ] && [ "$a" = "$b" ]
