#!/usr/bin/env bash
# `exdyna compare --ddp --quick` end to end: every hook of the head-to-head has its row (a failed
# hook a row saying why), and the report's numbers are those of its CSVs (check_ddp_report.py).
#   compare_ddp_quick.sh EXDYNA PYTHON PYTHONPATH
# Exit 0: passed; 77: skipped (the reason printed); anything else: failed.
set -uo pipefail
exe=$1
python=$2
export PYTHONPATH=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! ip netns add "exdprobe$$" 2>"$tmp/probe"; then
  echo "SKIP: cannot create network namespaces here: $(cat "$tmp/probe")"; exit 77
fi
ip netns delete "exdprobe$$"
if ! "$python" -c "import torch, exdyna.ddp" 2>"$tmp/probe"; then
  echo "SKIP: $python cannot import torch and exdyna.ddp: $(tail -1 "$tmp/probe")"; exit 77
fi
if [[ ! -e /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ]]; then
  echo "SKIP: no Fashion-MNIST under /usr/share/datasets/fashion-mnist"; exit 77
fi

hooks=allreduce,fp16,bf16,powersgd-r1,powersgd-r4,exdyna-d0.01,exdyna-d0.001
"$exe" compare --ddp --quick --python "$python" --out "$tmp/out" >"$tmp/stdout" 2>&1
rc=$?
cat "$tmp/stdout"
[[ $rc -eq 0 ]] || { echo "compare --ddp --quick exited $rc"; exit 1; }
"$python" "$here/check_ddp_report.py" "$tmp/out" cnn "$hooks" 2 1gbit || exit 1
# Two seeds of two hooks: a row per seed in summary.csv, mean and spread per hook in the report.
"$exe" compare --ddp --quick --seeds 2 --ddp-hooks allreduce,exdyna-d0.01 --python "$python" \
  --out "$tmp/seeds" >"$tmp/stdout" 2>&1
rc=$?
[[ $rc -eq 0 ]] || { echo "compare --ddp --seeds 2 exited $rc"; cat "$tmp/stdout"; exit 1; }
"$python" "$here/check_ddp_report.py" "$tmp/seeds" cnn allreduce,exdyna-d0.01 2 1gbit 2 || exit 1
grep -q "lead .*side the spread\|no hook reached the target with every seed" "$tmp/seeds/report.md" ||
  { echo "the seeds report has no headline:"; cat "$tmp/seeds/report.md"; exit 1; }
# A bad hook name is refused before anything runs, naming the value.
"$exe" compare --ddp --ddp-hooks allreduce,gzip --out "$tmp/bad" >"$tmp/stdout" 2>&1
rc=$?
[[ $rc -eq 2 ]] || { echo "a bad hook: exit $rc, expected 2"; cat "$tmp/stdout"; exit 1; }
grep -qF "'gzip' is not a hook" "$tmp/stdout" || { echo "the message does not name gzip:"; cat "$tmp/stdout"; exit 1; }
[[ ! -e "$tmp/bad/runs" ]] || { echo "a bad hook still ran"; exit 1; }
echo "compare_ddp_quick: passed"
