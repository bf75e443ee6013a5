#!/usr/bin/env bash
# `exdyna train --resume` on a checkpoint it must not trust: one flipped bit in rank 1's file, a
# truncated file, another --workers, another --sparsifier. Each run exits 2 with a message naming
# the file and the reason, and leaves every file of the run directory byte-identical (the resumed
# run writes into the very directory it resumes from).
set -euo pipefail
exe="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --dataset synthetic --model tiny --backend local --epochs 1 --batch-size 16
      --density 0.05 --no-progress --no-plots --out "$dir/run")
"$exe" "${args[@]}" --workers 2 --sparsifier topk --checkpoint-every 5 --max-steps 7 > /dev/null
ck="$dir/run/checkpoints/step-5"
[ -f "$ck/rank-1.bin" ] || { echo "no checkpoint was written"; exit 1; }
good=$(mktemp)
cp "$ck/rank-1.bin" "$good"

# expect_refused WORKERS SPARSIFIER PATTERN: the resume exits 2, prints PATTERN, changes nothing.
expect_refused() {
  local before after rc=0 out
  before=$(cd "$dir" && find . -type f | sort | xargs sha256sum)
  out=$("$exe" "${args[@]}" --workers "$1" --sparsifier "$2" --checkpoint-every 1 \
        --resume "$dir/run" 2>&1) || rc=$?
  after=$(cd "$dir" && find . -type f | sort | xargs sha256sum)
  echo "$out"
  [ "$rc" -eq 2 ] || { echo "FAIL: exit status $rc, expected 2"; exit 1; }
  grep -q -- "$3" <<< "$out" || { echo "FAIL: message lacks: $3"; exit 1; }
  [ "$before" = "$after" ] || { echo "FAIL: the refused resume changed files"; exit 1; }
}

python3 - "$ck/rank-1.bin" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0x04
open(p, 'wb').write(b)
PY
expect_refused 2 topk "checkpoint $ck/rank-1.bin: checksum mismatch"
head -c 100 "$good" > "$ck/rank-1.bin"
expect_refused 2 topk "checkpoint $ck/rank-1.bin: truncated: 100 of $(stat -c %s "$good") bytes"
cp "$good" "$ck/rank-1.bin"
expect_refused 3 topk "checkpoint $ck/rank-0.bin: written for 2 ranks, this run has 3"
expect_refused 2 dense "checkpoint $ck/rank-0.bin: written by sparsifier topk, this run uses dense"
rm -f "$good"
echo "all refused"
