#!/usr/bin/env bash
# GPUs over emulated links: `exdyna compare --ddp` with every rank on the GPU. 4 emulated hosts
# (network namespaces joined by tc-shaped veth links, as compare builds them on the CPU), one rank
# each, all 4 sharing the machine's one GPU over Gloo (NCCL refuses two ranks on one device);
# ResNet-18 on Fashion-MNIST and the transformer, with DDP's all-reduce, bf16, PowerSGD (rank 4)
# and exdyna (d = 0.01), at 1 and 10 Gbit/s; the report gives each hook's time to the target.
#
#   bash scripts/gpu-race-links.sh OUTDIR
#
# First scripts/gpu-links-probe.sh (a few seconds): where the machine refuses namespaces, veth or
# tc, the race is not run and the script exits 77 ("skipped") with the probe's reason. compare
# has no mode that shapes the loopback alone (every rank sharing one link), so the probe only
# reports whether tc could do that.
#
# Needs the exdyna command (.gpu-data/bin/exdyna from scripts/gpu-race-prepare.sh, carried, or
# build/exdyna), an interpreter with torch and the exdyna package (with the GPU path for exdyna's
# hook on CUDA buckets), and the data: .gpu-data/fashion-mnist and
# .gpu-data/python3.11-doc-sources.tar.gz where Debian's packages are missing.
#
# Writes into OUTDIR (3 files): race-links-report.md, race-links-summary.csv and race-links.tar.gz
# (runs/*/steps.csv and status.txt, each launch's commands and node logs, links-probe.txt).
# Exit 0 when the report was written (a failed run is a row of it), 77 when skipped, 1 otherwise.
#
# Environment (defaults: the GPU race): RACE_PYTHON (python3), RACE_EXDYNA, RACE_DEVICE (cuda),
# RACE_DATA (.gpu-data), RACE_MODELS (resnet18,transformer), RACE_HOOKS
# (allreduce,bf16,powersgd-r4,exdyna-d0.01), RACE_BANDWIDTHS (1gbit,10gbit), RACE_WORKERS (4),
# RACE_BUDGET_S (12: seconds of training per run, then it stops at its next evaluation),
# RACE_STEPS (3000: more than a run reaches in its budget), RACE_EVAL_EVERY (10), RACE_LIMIT_S
# (330: compare is stopped then, and the report made of the runs that finished), RACE_SCRIPT_ARGS
# (more arguments of examples/ddp_hooks.py, comma-separated), RACE_WORK (/tmp/race-links: the
# compare output). 16 runs of 12 s plus their start-ups fit in about 5.5 minutes. The dry run on
# the CPU (a few steps of each run, any machine with namespaces):
#
#   RACE_DEVICE=cpu RACE_STEPS=2 RACE_BUDGET_S=0 RACE_EVAL_EVERY=2 RACE_EXDYNA=build/exdyna \
#   RACE_SCRIPT_ARGS=--batch,4,--eval-images,64,--vocab,2000,--calibrate,1 \
#   PYTHONPATH=build/python bash scripts/gpu-race-links.sh /tmp/race-dry
set -u
if [ $# -ne 1 ]; then
  echo "usage: bash scripts/gpu-race-links.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
OUTDIR=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${RACE_PYTHON:-python3}
DEVICE=${RACE_DEVICE:-cuda}
DATA=${RACE_DATA:-$REPO/.gpu-data}
WORK=${RACE_WORK:-/tmp/race-links}
EXE=${RACE_EXDYNA:-}
if [ -z "$EXE" ]; then
  EXE=$REPO/build/exdyna
  [ -x "$DATA/bin/exdyna" ] && EXE=$DATA/bin/exdyna
fi

rm -rf "$WORK" && mkdir -p "$WORK/out" || exit 1
out=$WORK/out
# The probe's GPU check only where the race runs on the GPU.
probe_py=""
[ "$DEVICE" = cuda ] && probe_py=$PY
bash "$REPO/scripts/gpu-links-probe.sh" "$probe_py" | tee "$out/links-probe.txt"
if [ "${PIPESTATUS[0]}" != 0 ]; then
  echo "race-links skipped: $(tail -1 "$out/links-probe.txt" | sed 's/^links-probe: //')"
  exit 77
fi
"$EXE" compare --help >/dev/null 2>&1 || {
  echo "race-links: $EXE does not start ($("$EXE" --help 2>&1 | head -2 | tr '\n' ' ')); run scripts/gpu-race-prepare.sh and carry .gpu-data" >&2
  exit 1
}

# The data: the carried copies where Debian's packages are missing.
fashion=/usr/share/datasets/fashion-mnist
[ -d "$DATA/fashion-mnist" ] && fashion=$DATA/fashion-mnist
corpus=/usr/share/doc/python3.11/html/_sources
if [ -f "$DATA/python3.11-doc-sources.tar.gz" ]; then
  tar -xzf "$DATA/python3.11-doc-sources.tar.gz" -C "$WORK" || exit 1
  corpus=$WORK/_sources
fi
echo "race-links: $EXE, $PY on $DEVICE; Fashion-MNIST $fashion; corpus $corpus"

args=(compare --ddp --ddp-device "$DEVICE" --python "$PY"
  --ddp-script "$REPO/examples/ddp_hooks.py" --ddp-report-script "$REPO/examples/ddp_hooks_report.py"
  --workers "${RACE_WORKERS:-4}" --bandwidth "${RACE_BANDWIDTHS:-1gbit,10gbit}"
  --ddp-models "${RACE_MODELS:-resnet18,transformer}"
  --ddp-hooks "${RACE_HOOKS:-allreduce,bf16,powersgd-r4,exdyna-d0.01}"
  --ddp-steps "${RACE_STEPS:-3000}" --ddp-budget "${RACE_BUDGET_S:-12}"
  --ddp-eval-every "${RACE_EVAL_EVERY:-10}"
  "--ddp-script-args=--fashion,$fashion,--corpus,$corpus${RACE_SCRIPT_ARGS:+,$RACE_SCRIPT_ARGS}"
  --out "$out")
echo "race-links: $EXE ${args[*]}"
timeout -k 20 "${RACE_LIMIT_S:-330}" "$EXE" "${args[@]}"
rc=$?
if [ ! -s "$out/report.md" ] && [ -d "$out/runs" ]; then
  # Stopped at the limit: the report of the runs that finished (the others are rows saying so).
  echo "race-links: compare ended with exit $rc and no report; the report of what finished:"
  "$EXE" compare --ddp --report-only --python "$PY" \
    --ddp-report-script "$REPO/examples/ddp_hooks_report.py" --out "$out"
fi
[ -s "$out/report.md" ] || { echo "race-links: no report (compare exit $rc)" >&2; exit 1; }
cp "$out/report.md" "$OUTDIR/race-links-report.md"
cp "$out/summary.csv" "$OUTDIR/race-links-summary.csv"
# The word-id cache and the figures' inputs stay behind: the CSVs redraw everything.
tar -czf "$OUTDIR/race-links.tar.gz" -C "$out" --exclude='*.pt' runs launches report.md \
  summary.csv links-probe.txt
echo "race-links: report in $OUTDIR/race-links-report.md (compare exit $rc)"
exit 0
