#!/usr/bin/env bash
# One command-line case of `exdyna simulate`: builds any trace fixture it needs in a fresh temporary
# directory, runs the command, and checks the exit status and the message.
#   cli_case.sh EXDYNA CASE
# Bad input must exit with status 2 (exdyna::Error) and name the value; never crash (>= 128) or
# hang (CTest's TIMEOUT catches that). Good input must exit 0 with the expected output.
set -u
exe=$1
case_name=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# trace DIR META: a trace directory with that meta.json text and an empty grads.f32 to append to.
trace() {
  mkdir -p "$1"
  printf '%s' "$2" > "$1/meta.json"
  : > "$1/grads.f32"
}
zeros() { head -c "$1" /dev/zero; }
# 2 iterations x 2 workers x 4 floats = 64 bytes.
meta='{"n_g": 4, "workers": 2, "iterations": 2}'
nan='\x00\x00\xc0\x7f'
inf='\x00\x00\x80\x7f'

want_rc=2
small=(--sparsifier dense --n-grad 4096 --iterations 3)
case $case_name in
  density_zero) args=(--density 0); re='--density: 0 is not valid; expected a number in \(0, 1\]' ;;
  density_above_one) args=(--density 1.5); re='--density: 1.5 is not valid; expected a number in \(0, 1\]' ;;
  density_nan) args=(--density nan); re='--density: nan is not valid' ;;
  blocks_below_workers) args=(--sparsifier exdyna --workers 8 --blocks 4 --n-grad 100000)
    re='--blocks \(n_b\) 4 is smaller than the number of workers 8 \(--workers\)' ;;
  n_grad_zero) args=(--n-grad 0); re='--n-grad: 0 is not valid; expected an integer >= 1' ;;
  # Refused while parsing, naming the option as typed, still exit status 2.
  workers_zero) args=(--workers 0); re='--workers: 0 is not valid; expected an integer in 1\.\.4096' ;;
  iterations_zero) args=(--iterations 0); re='--iterations: 0 is not valid; expected an integer >= 1' ;;
  min_blk_negative) args=(--min-blk -1); re='--min-blk: -1 is not valid; expected a finite number > 0' ;;
  timeout_zero) args=(--timeout 0); re='--timeout: 0 is not valid; expected a finite number > 0' ;;
  density_not_a_number) args=(--density abc); re='--density: abc is not valid' ;;
  unknown_sparsifier) args=(--sparsifier nope); re="unknown sparsifier 'nope'; expected one of: .*dense" ;;
  bad_gather) args=(--gather sideways); re="gather mode 'sideways' is not valid" ;;
  bad_values) args=(--values fp8); re="--values: value format 'fp8' is not valid; expected 'fp32', 'fp16' or 'bf16'" ;;
  bad_scale_step) args=(--scale-step 10); re="scale step '10' is not valid; expected ITER:FACTOR" ;;
  bad_controller) args=(--sparsifier exdyna --controller fuzzy)
    re="controller 'fuzzy' is not valid; expected 'paper', 'histogram' or 'exact'" ;;
  worker_cap_below_one) args=(--sparsifier exdyna --controller exact --worker-cap 0.5)
    re="worker cap '0.5' is not valid; expected auto, none, 0 or a factor >= 1" ;;
  worker_cap_needs_exact) args=(--sparsifier exdyna --controller histogram --worker-cap 1.5)
    re="--worker-cap 1.5 needs --controller exact" ;;
  trace_nan)
    trace "$tmp/t" "$meta"; zeros 20 >> "$tmp/t/grads.f32"; printf "$nan" >> "$tmp/t/grads.f32"; zeros 40 >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --density 1 --trace "$tmp/t"); re="gradient element 1 of iteration 0 on rank 1 is nan.*expected a finite value" ;;
  trace_inf)
    trace "$tmp/t" "$meta"; zeros 60 >> "$tmp/t/grads.f32"; printf "$inf" >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --density 1 --trace "$tmp/t"); re="gradient element 3 of iteration 1 on rank 1 is inf" ;;
  trace_short)
    trace "$tmp/t" "$meta"; zeros 60 >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --trace "$tmp/t"); re="has 60 bytes; meta.json .* says 64 bytes \(the trace is shorter than meta.json says\)" ;;
  trace_invalid_json)
    trace "$tmp/t" '{"n_g": 4, "workers": 2,'; zeros 64 >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --trace "$tmp/t"); re="meta.json is not valid JSON" ;;
  trace_missing_field)
    trace "$tmp/t" '{"n_g": 4, "iterations": 2}'; zeros 64 >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --trace "$tmp/t"); re='field "workers" is missing; expected a positive integer' ;;
  trace_not_positive)
    trace "$tmp/t" '{"n_g": 4, "workers": 0, "iterations": 2}'; zeros 64 >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --trace "$tmp/t"); re='field "workers" is 0; expected 1\.\.' ;;
  trace_missing)
    args=(--sparsifier dense --trace "$tmp/nowhere"); re="trace directory '.*nowhere' does not exist" ;;
  trace_more_iterations)
    trace "$tmp/t" "$meta"; zeros 64 >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --trace "$tmp/t" --iterations 3); re='--iterations 3 is more than the 2 iterations of trace' ;;
  decisions_header)
    want_rc=0
    args=("${small[@]}" --workers 3 --decisions "$tmp/d.csv")
    re='actual density / target' ;;
  trace_runs)
    want_rc=0
    trace "$tmp/t" "$meta"; zeros 64 >> "$tmp/t/grads.f32"
    args=(--sparsifier dense --density 1 --trace "$tmp/t" --decisions "$tmp/d.csv"); re='dense on 2 workers, 2 iterations, n_g = 4 from trace' ;;
  *) echo "unknown case $case_name"; exit 1 ;;
esac

out=$("$exe" simulate "${args[@]}" 2>&1)
rc=$?
echo "$ exdyna simulate ${args[*]}"
echo "$out"
echo "(exit status $rc)"
if [ "$rc" -ne "$want_rc" ]; then echo "FAIL: expected exit status $want_rc"; exit 1; fi
if ! grep -Eq -- "$re" <<<"$out"; then echo "FAIL: output does not match: $re"; exit 1; fi
if [ "$want_rc" -ne 0 ] && [ -e "$tmp/d.csv" ]; then echo "FAIL: a failed run left a decisions file"; exit 1; fi
case $case_name in
  decisions_header)
    header=$(head -1 "$tmp/d.csv")
    want='iter,threshold,k_total,density,f_t,k_w0,k_w1,k_w2,alloc_w0,alloc_w1,alloc_w2,blocks_p0,blocks_p1,blocks_p2'
    if [ "$header" != "$want" ]; then echo "FAIL: header is '$header', expected '$want'"; exit 1; fi
    if [ "$(wc -l < "$tmp/d.csv")" -ne 4 ]; then echo "FAIL: expected a header and 3 rows"; exit 1; fi ;;
  trace_runs)
    if [ "$(wc -l < "$tmp/d.csv")" -ne 3 ]; then echo "FAIL: expected a header and 2 rows"; exit 1; fi ;;
esac
echo PASS
