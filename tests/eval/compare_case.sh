#!/usr/bin/env bash
# One case of `exdyna compare` from the command line: compare_case.sh EXDYNA CASE.
# Exit 0: passed; 77: skipped (the reason printed); anything else: failed.
set -uo pipefail
exe=$1
case_name=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect_bad ARGS...: exit status 2 and a message naming $want.
expect_bad() {
  "$exe" compare --no-train --out "$tmp/out" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ $rc -ne 2 ]]; then
    echo "expected exit 2, got $rc"; cat "$tmp/stdout" "$tmp/stderr"; exit 1
  fi
  if ! grep -qF -- "$want" "$tmp/stderr"; then
    echo "the message does not name '$want':"; cat "$tmp/stderr"; exit 1
  fi
  if [[ -e "$tmp/out/cells.csv" ]]; then echo "bad options still ran the matrix"; exit 1; fi
}

case "$case_name" in
  bad_sparsifier) want="'foo'" expect_bad --sparsifiers topk,foo ;;
  bad_bandwidth) want="'fast'" expect_bad --bandwidth 1gbit,fast ;;
  bad_workers) want="--workers '0'" expect_bad --workers 0 ;;
  bad_delay) want="'soon'" expect_bad --delay soon ;;
  bad_network) want="'wifi'" expect_bad --network wifi ;;
  # The shared sparsifier options (apps/sparsifier_cli.hpp): one that a chosen label fixes is refused,
  # so is one that tunes no chosen label, and a cell's options are checked before anything runs.
  option_fixed_by_label) want="--controller exact: the label exdyna-paper in --sparsifiers fixes it"
    expect_bad --sparsifiers exdyna,exdyna-paper --controller exact ;;
  option_tunes_no_label) want="--blocks 64 tunes exdyna, but no label in --sparsifiers runs exdyna"
    expect_bad --sparsifiers topk,sidco --blocks 64 ;;
  option_bad_for_a_cell) want="cell exdyna at --workers 8, --density 0.01: --blocks (n_b) 4"
    expect_bad --sparsifiers exdyna --workers 2,8 --density 0.01 --blocks 4 ;;
  ddp_no_python)
    # An interpreter that cannot import torch and exdyna is refused before anything runs.
    "$exe" compare --ddp --python /nonexistent/python3 --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [[ $rc -eq 2 ]] || { echo "expected exit 2, got $rc"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
    grep -qF -- "--python: /nonexistent/python3 cannot import torch and exdyna.ddp" "$tmp/stderr" ||
      { echo "the message does not name the interpreter:"; cat "$tmp/stderr"; exit 1; }
    [[ ! -e "$tmp/out/launches" ]] || { echo "it launched runs"; exit 1; }
    ;;
  ddp_hsdp_needs_ranks)
    # An HSDP hook without a shard group inside each host is refused before any interpreter runs.
    "$exe" compare --ddp --ddp-models transformer --ddp-hooks hsdp,hsdp-exdyna-d0.01 \
      --python /nonexistent/python3 --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [[ $rc -eq 2 ]] || { echo "expected exit 2, got $rc"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
    grep -qF -- "--ddp-hooks hsdp: HSDP shards the model over a host's ranks; expected --ddp-ranks-per-host 2 or more (it is 1)" "$tmp/stderr" ||
      { echo "the message does not name the hook and the option:"; cat "$tmp/stderr"; exit 1; }
    "$exe" compare --ddp --ddp-models transformer --ddp-hooks hsdp --ddp-ranks-per-host 0 \
      --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [[ $rc -eq 2 ]] && grep -qF -- "--ddp-ranks-per-host 0 is not valid" "$tmp/stderr" ||
      { echo "--ddp-ranks-per-host 0: exit $rc"; cat "$tmp/stderr"; exit 1; }
    [[ ! -e "$tmp/out/launches" ]] || { echo "it launched runs"; exit 1; }
    ;;
  ddp_hsdp_needs_fsdp2)
    # Under a torch without FSDP2 (Debian's 1.13) an HSDP hook is refused by name, before any run.
    py=${PYTHON:-python3}
    if ! "$py" -c 'import torch, exdyna.fsdp' 2>/dev/null; then
      echo "SKIP: $py cannot import torch and exdyna.fsdp"; exit 77
    fi
    if "$py" -c 'import sys, exdyna.fsdp; sys.exit(not exdyna.fsdp.available())'; then
      echo "SKIP: $py's torch has FSDP2 (the refusal needs one without it)"; exit 77
    fi
    "$exe" compare --ddp --ddp-models transformer --ddp-hooks hsdp-exdyna-d0.01 \
      --ddp-ranks-per-host 2 --python "$py" --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [[ $rc -eq 2 ]] || { echo "expected exit 2, got $rc"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
    grep -qF -- "--ddp-hooks hsdp-exdyna-d0.01: needs FSDP2" "$tmp/stderr" &&
      grep -qF "exdyna.fsdp.MIN_TORCH" "$tmp/stderr" ||
      { echo "the message does not name the hook and FSDP2:"; cat "$tmp/stderr"; exit 1; }
    [[ ! -e "$tmp/out/launches" ]] || { echo "it launched runs"; exit 1; }
    ;;
  ddp_bad_device)
    # --ddp-device is cpu or cuda; another value is refused by name before any interpreter runs,
    # and so are the HSDP hooks on the GPU.
    "$exe" compare --ddp --ddp-device gpu --python /nonexistent/python3 --out "$tmp/out" \
      >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [[ $rc -eq 2 ]] || { echo "expected exit 2, got $rc"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
    grep -qF -- "--ddp-device 'gpu' is not a device; expected cpu or cuda" "$tmp/stderr" ||
      { echo "the message does not name the value:"; cat "$tmp/stderr"; exit 1; }
    "$exe" compare --ddp --ddp-device cuda --ddp-models transformer --ddp-hooks hsdp \
      --ddp-ranks-per-host 2 --python /nonexistent/python3 --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [[ $rc -eq 2 ]] && grep -qF -- "--ddp-hooks hsdp: the HSDP hooks run on the CPU only" "$tmp/stderr" ||
      { echo "hsdp on cuda: exit $rc"; cat "$tmp/stderr"; exit 1; }
    [[ ! -e "$tmp/out/launches" ]] || { echo "it launched runs"; exit 1; }
    ;;
  ddp_cuda_unavailable)
    # --ddp-device cuda where the ranks' torch sees no GPU: refused before any run, naming it.
    py=${PYTHON:-python3}
    if ! "$py" -c 'import torch, exdyna.ddp' 2>/dev/null; then
      echo "SKIP: $py cannot import torch and exdyna.ddp"; exit 77
    fi
    if "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
      echo "SKIP: $py's torch sees a GPU (the refusal needs a machine without one)"; exit 77
    fi
    "$exe" compare --ddp --ddp-device cuda --ddp-models resnet18 --ddp-hooks allreduce \
      --python "$py" --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [[ $rc -eq 2 ]] || { echo "expected exit 2, got $rc"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
    grep -qF -- "--ddp-device cuda: the torch of --python $py sees no GPU" "$tmp/stderr" ||
      { echo "the message does not name the device and the interpreter:"; cat "$tmp/stderr"; exit 1; }
    [[ ! -e "$tmp/out/launches" ]] || { echo "it launched runs"; exit 1; }
    ;;
  ddp_none_trained)
    # Every run failing is the comparison's failure (exit 1), not only rows of the report.
    if ! ip netns add "exdprobe$$" 2>"$tmp/probe"; then
      echo "SKIP: cannot create network namespaces here: $(cat "$tmp/probe")"; exit 77
    fi
    ip netns delete "exdprobe$$"
    printf 'import sys\nsys.exit("this rank fails on purpose")\n' >"$tmp/fails.py"
    "$exe" compare --ddp --ddp-script "$tmp/fails.py" --python "${PYTHON:-python3}" --workers 2 \
      --bandwidth 1gbit --ddp-models cnn --ddp-hooks allreduce --ddp-steps 1 --out "$tmp/out" \
      >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    if [[ $rc -eq 2 ]] && grep -qF "cannot import torch" "$tmp/stderr"; then
      echo "SKIP: $(cat "$tmp/stderr")"; exit 77
    fi
    [[ $rc -eq 1 ]] || { echo "expected exit 1, got $rc"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
    grep -qF "none of the 1 runs trained" "$tmp/stderr" ||
      { echo "the message does not say so:"; cat "$tmp/stdout" "$tmp/stderr"; exit 1; }
    ;;
  forwards_options)
    # Model network (no namespaces needed): --gather to every cell, --blocks to the exdyna ones.
    "$exe" compare --no-train --network model --out "$tmp/out" --sparsifiers topk,exdyna,exdyna-exact \
      --workers 2 --bandwidth 1gbit --density 0.01 --n-grad 65536 --iterations 1 --blocks 64 \
      --gather-mode exact >"$tmp/stdout" 2>&1 || { cat "$tmp/stdout"; echo "compare failed"; exit 1; }
    args() { tr -d ' \n' <"$tmp/out/cells/$1-w2-b1gbit-d0.01/cell.json" | grep -o '"args":\[[^]]*\]'; }
    for l in topk exdyna exdyna-exact; do
      echo "$l: $(args $l)"
      args $l | grep -qF '"--gather","exact"' || { echo "$l: no --gather exact"; exit 1; }
    done
    for l in exdyna exdyna-exact; do
      args $l | grep -qF '"--blocks","64"' || { echo "$l: no --blocks 64"; exit 1; }
    done
    args exdyna-exact | grep -qF '"--controller","exact"' || { echo "exdyna-exact lost its label's options"; exit 1; }
    if args topk | grep -qF -- '--blocks'; then echo "topk was given --blocks"; exit 1; fi
    # The blocks reached ExDyna: the two partitions of iteration 0 hold 64 blocks.
    IFS=, read -r p0 p1 < <(sed -n 2p "$tmp/out/cells/exdyna-w2-b1gbit-d0.01/decisions.csv" | cut -d, -f10,11)
    [[ $((p0 + p1)) -eq 64 ]] || { echo "partitions hold $((p0 + p1)) blocks, expected 64"; exit 1; }
    ;;
  quick)
    if ! ip netns add "exdprobe$$" 2>"$tmp/probe"; then
      echo "SKIP: cannot create network namespaces here: $(cat "$tmp/probe")"; exit 77
    fi
    ip netns delete "exdprobe$$"
    "$exe" compare --quick --no-train --out "$tmp/out" >"$tmp/stdout" 2>"$tmp/stderr" &
    pid=$!
    wait $pid
    rc=$?
    cat "$tmp/stdout" "$tmp/stderr"
    [[ $rc -eq 0 ]] || { echo "compare --quick exited $rc"; exit 1; }
    left=$(ip netns list | grep -c "^exd${pid}-" || true)
    [[ $left -eq 0 ]] || { echo "$left namespaces of the run are left"; ip netns list; exit 1; }
    header=$(head -1 "$tmp/out/cells.csv")
    [[ $header == sparsifier,label,workers,bandwidth_bps,delay_us,density,n_g,iterations,compute_ms,iter_ms,* ]] \
      || { echo "cells.csv header: $header"; exit 1; }
    # 2 worker counts x 2 bandwidths x 8 labels at one density.
    rows=$(($(wc -l <"$tmp/out/cells.csv") - 1))
    [[ $rows -eq 32 ]] || { echo "cells.csv has $rows rows, expected 32"; exit 1; }
    for op in allreduce allgather-padded allgather-exact broadcast alltoall; do
      grep -q "^4,10000000000,[^,]*,$op," "$tmp/out/comm.csv" || { echo "comm.csv lacks $op at 4 hosts, 10gbit"; exit 1; }
    done
    [[ -s "$tmp/out/cells/exdyna-exact-w4-b1gbit-d0.01/stats.csv" ]] || { echo "no stats.csv"; exit 1; }
    # Every rank's own statistics (simulate --stats with {rank}): the slowest rank sets the pace.
    [[ -s "$tmp/out/cells/cltk-w4-b1gbit-d0.01/logs/stats-r3.csv" ]] || { echo "no rank 3 stats"; exit 1; }
    grep -q '"complete": true' "$tmp/out/cells/dense-w2-b10gbit/cell.json" || { echo "no cell.json"; exit 1; }
    # A second run keeps every finished cell.
    "$exe" compare --quick --no-train --out "$tmp/out" >"$tmp/stdout2" 2>&1 || { cat "$tmp/stdout2"; exit 1; }
    grep -q "resuming: 32 of 32 cells kept" "$tmp/stdout2" || { echo "not resumed:"; cat "$tmp/stdout2"; exit 1; }
    # A resumed run derives each kept cell again from its statistics and comm.csv: twice one
    # setting's sweep times, twice its cells' communication.
    cell_json="$tmp/out/cells/exdyna-exact-w4-b1gbit-d0.01/cell.json"
    comm_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["comm_ms"])' "$1"; }
    before=$(comm_of "$cell_json")
    awk -F, -v OFS=, '$1 == "4" && $2 == "1000000000" { $6 = sprintf("%.17g", 2 * $6) } { print }' \
      "$tmp/out/comm.csv" >"$tmp/comm2" && mv "$tmp/comm2" "$tmp/out/comm.csv"
    "$exe" compare --quick --no-train --out "$tmp/out" >"$tmp/stdout3" 2>&1 || { cat "$tmp/stdout3"; exit 1; }
    after=$(comm_of "$cell_json")
    python3 -c 'import sys; b, a = map(float, sys.argv[1:]); sys.exit(abs(a - 2 * b) > 1e-9 * a)' \
      "$before" "$after" || { echo "comm_ms $before -> $after after doubling the sweep; expected twice"; exit 1; }
    ;;
  *) echo "unknown case $case_name"; exit 1 ;;
esac
echo "ok"
