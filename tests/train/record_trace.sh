#!/usr/bin/env bash
# `exdyna train --record-trace` through the command line, on 2 Gloo worker processes.
#   record    a 4-step run records its first 3 steps into a trace of exactly 3 x 2 x n_g floats,
#             and `exdyna simulate --trace` replays it (with and without a scale step) with sane
#             decisions: 3 rows, positive counts, finite densities.
#   used_dir  a directory that holds anything is refused (exit != 0, message naming it) and left
#             as it was; so is a negative --record-steps.
set -euo pipefail
exe="$1"
case_name="$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --dataset synthetic --model tiny --backend gloo --workers 2 --max-steps 4
      --batch-size 16 --density 0.05 --no-progress --no-plots --timeout 60)
fail() { echo "FAIL: $*"; exit 1; }

case "$case_name" in
  record)
    "$exe" "${args[@]}" --out "$dir/out" --record-trace "$dir/trace" --record-steps 3 | tee "$dir/log"
    grep -q "trace: $dir/trace (3 iterations x 2 workers" "$dir/log" || fail "no trace line"
    meta=$(cat "$dir/trace/meta.json")
    echo "meta.json: $meta"
    n_g=$(echo "$meta" | grep -o '"n_g": *[0-9]*' | grep -o '[0-9]*$')
    [ "$(echo "$meta" | grep -o '"workers": *[0-9]*' | grep -o '[0-9]*$')" = 2 ] || fail "workers"
    [ "$(echo "$meta" | grep -o '"iterations": *[0-9]*' | grep -o '[0-9]*$')" = 3 ] || fail "iterations"
    size=$(stat -c %s "$dir/trace/grads.f32")
    [ "$size" = $((3 * 2 * n_g * 4)) ] || fail "grads.f32 has $size bytes, expected $((3 * 2 * n_g * 4))"
    # The recorded gradients are not all zero (od prints '*' for repeated lines: look for a digit
    # other than 0 in the first few kB). No `grep -q` at the end of a pipe: under pipefail its
    # early exit can kill od with SIGPIPE and fail the pipe though a digit was found (seen once in
    # CI under load).
    nonzero=$(od -An -tx4 -N 4096 "$dir/trace/grads.f32" | grep -c '[1-9a-f]' || true)
    [ "$nonzero" -gt 0 ] || fail "all-zero gradients"

    "$exe" simulate --trace "$dir/trace" --sparsifier exdyna --density 0.05 \
        --decisions "$dir/dec.csv" | tee "$dir/sim"
    grep -q "on 2 workers, 3 iterations, n_g = $n_g from trace" "$dir/sim" || fail "summary header"
    [ "$(wc -l < "$dir/dec.csv")" = 4 ] || fail "expected a header and 3 rows in dec.csv"
    # iter,threshold,k_total,density,f_t,...: counts > 0, densities in (0, 1], f(t) >= 1.
    tail -n +2 "$dir/dec.csv" | awk -F, '{ if (!($3 > 0 && $4 > 0 && $4 <= 1 && $5 >= 1)) bad = 1 }
        END { exit bad }' || fail "insane decisions: $(cat "$dir/dec.csv")"

    "$exe" simulate --trace "$dir/trace" --sparsifier exdyna --density 0.05 --scale-step 1:0.5 \
        | tee "$dir/sim2"
    grep -q "trace '$dir/trace', x0.5 at 1" "$dir/sim2" || fail "scale step not in the header"
    grep -q "after x0.5 at 1: back in" "$dir/sim2" || fail "no recovery line"
    ;;
  used_dir)
    mkdir "$dir/trace"
    echo keep > "$dir/trace/notes.txt"
    set +e
    "$exe" "${args[@]}" --out "$dir/out" --record-trace "$dir/trace" > "$dir/log" 2>&1
    rc=$?
    "$exe" "${args[@]}" --out "$dir/out" --record-trace "$dir/new" --record-steps -1 > "$dir/log2" 2>&1
    rc2=$?
    set -e
    cat "$dir/log" "$dir/log2"
    [ "$rc" -ne 0 ] || fail "a used directory was accepted"
    grep -q -- "--record-trace: trace directory '$dir/trace' is not empty (it holds 'notes.txt')" \
        "$dir/log" || fail "message"
    [ "$(ls "$dir/trace")" = notes.txt ] && [ "$(cat "$dir/trace/notes.txt")" = keep ] \
        || fail "the used directory was changed"
    [ -e "$dir/out" ] && fail "training started"
    [ "$rc2" -ne 0 ] || fail "--record-steps -1 was accepted"
    grep -q -- "--record-steps -1 is not valid" "$dir/log2" || fail "message of --record-steps"
    [ -e "$dir/new" ] && fail "--record-steps -1 created the directory"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "ok: $case_name"
