#!/usr/bin/env bash
# One case of the sparsifier flags that `exdyna simulate`, `exdyna train` and `exdyna compare` share
# (apps/sparsifier_cli.hpp): each command's --help lists them, an old spelling is an alias of the
# new one, the ExDyna options reach the sparsifier, and a bad value exits 2 naming the value.
#   flags_case.sh EXDYNA CASE
set -u
exe=$1
case_name=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
# run RC ARGS...: runs exdyna ARGS, shows it, and expects exit status RC; the output is in $out.
run() {
  local want=$1
  shift
  out=$("$exe" "$@" 2>&1)
  local rc=$?
  echo "$ exdyna $*"
  echo "$out" | tail -20
  echo "(exit status $rc)"
  [ "$rc" -eq "$want" ] || fail "expected exit status $want"
}
has() { grep -Eq -- "$1" <<<"$out" || fail "output does not match: $1"; }
field() { grep -o "\"$2\": \"\\?[^,\"]*" "$1/summary.json" | sed 's/.*: "\?//'; }

# The option table's flags (sparsifiers/option_table.hpp), from `exdyna options --markdown`.
mapfile -t table_flags < <("$exe" options --markdown | awk -F'`' 'NR > 2 { print $4 }')
[ "${#table_flags[@]}" -ge 10 ] || fail "exdyna options --markdown lists ${#table_flags[@]} flags"
sim=(simulate --sparsifier exdyna --n-grad 8192 --iterations 3 --workers 2)
train=(train --dataset synthetic --model tiny --backend local --workers 2 --max-steps 3
       --batch-size 16 --density 0.05 --no-progress --no-plots)
case $case_name in
  simulate_help | train_help)
    run 0 "${case_name%_help}" --help
    for f in --sparsifier --density "${table_flags[@]}" --backend --timeout --listen --all-ranks-output; do
      has "^ +$f[ ,]"
    done
    if [ "$case_name" = simulate_help ]; then has '^ +--synthetic-layers,--layers '
    else has '^ +--lstm-layers,--layers '; fi ;;
  compare_help)
    # compare's labels choose the sparsifier: it takes the options that tune one, as simulate does.
    run 0 compare --help
    for f in "${table_flags[@]}"; do
      has "^ +$f[ ,]"
    done
    if grep -Eq -- '^ +--sparsifier ' <<<"$out"; then fail "compare lists --sparsifier"; fi ;;
  docs_options)
    # docs/sparsifiers.md holds the option table as `exdyna options --markdown` prints it.
    doc=$(dirname "$0")/../../docs/sparsifiers.md
    sed -n '/^<!-- options:/,/^<!-- end options -->/p' "$doc" | sed '1d;$d' >"$tmp/doc.md"
    "$exe" options --markdown >"$tmp/table.md" || fail "exdyna options --markdown failed"
    diff "$tmp/table.md" "$tmp/doc.md" ||
      fail "docs/sparsifiers.md's option table differs from exdyna options --markdown (paste it)" ;;
  simulate_gather_alias)
    # Both spellings run, and run the same thing.
    run 0 "${sim[@]}" --gather exact --decisions "$tmp/new.csv"
    run 0 "${sim[@]}" --gather-mode exact --decisions "$tmp/old.csv"
    cmp "$tmp/new.csv" "$tmp/old.csv" || fail "--gather exact and --gather-mode exact differ" ;;
  train_gather_alias)
    run 0 "${train[@]}" --gather exact --out "$tmp/new"
    run 0 "${train[@]}" --gather-mode exact --out "$tmp/old"
    for d in new old; do
      [ "$(field "$tmp/$d" gather_mode)" = exact ] || fail "$d: gather_mode is not exact"
    done
    [ "$(field "$tmp/new" params_fnv1a)" = "$(field "$tmp/old" params_fnv1a)" ] ||
      fail "--gather exact and --gather-mode exact trained different parameters" ;;
  simulate_bad_gather | train_bad_gather)
    if [ "$case_name" = simulate_bad_gather ]; then run 2 "${sim[@]}" --gather fast
    else run 2 "${train[@]}" --gather fast --out "$tmp/t"; fi
    has "--gather: gather mode 'fast' is not valid; expected 'padded' or 'exact'" ;;
  train_bad_values)
    run 2 "${train[@]}" --values fp8 --out "$tmp/t"
    has "--values: value format 'fp8' is not valid; expected 'fp32', 'fp16' or 'bf16'" ;;
  train_bad_lstm_layers)
    # Both spellings are refused naming the flag's own name, not the alias.
    for f in --lstm-layers --layers; do
      run 2 "${train[@]}" "$f" 0 --out "$tmp/t"
      has "--lstm-layers 0 is not valid; expected > 0"
    done ;;
  train_dgc_warmup)
    # The warm-up's first density drives the first steps and the summary shows the schedule.
    run 0 "${train[@]}" --sparsifier dgc --dgc-warmup-epochs 2 --dgc-warmup-start 0.5 --out "$tmp/t"
    has "dgc density warm-up +0.5 \\(epoch 1\\), 0.1581 \\(epoch 2\\), then 0.05 from epoch 3"
    col=$(head -1 "$tmp/t/iterations.csv" | tr , '\n' | grep -nx target_density | cut -d: -f1)
    targets=$(tail -n +2 "$tmp/t/iterations.csv" | cut -d, -f"$col" | sort -u)
    [ "$targets" = 0.5 ] || fail "the first steps' target density is '$targets', expected 0.5"
    grep -q '"dgc_warmup_epochs": 2' "$tmp/t/summary.json" || fail "summary.json: no dgc_warmup_epochs" ;;
  train_bad_dgc_warmup)
    run 2 "${train[@]}" --sparsifier dgc --dgc-warmup-epochs -1 --out "$tmp/t"
    has "--dgc-warmup-epochs: -1 is not valid; expected an integer >= 0"
    run 2 "${train[@]}" --sparsifier dgc --dgc-warmup-epochs 2 --dgc-warmup-start 0.01 --out "$tmp/t"
    has "--dgc-warmup-start 0.01 is not valid; expected a density in \\(0.05, 1\\]"
    run 2 "${train[@]}" --sparsifier dgc --dgc-warmup-epochs 2 --dgc-warmup-start 1.5 --out "$tmp/t"
    has "--dgc-warmup-start 1.5 is not valid"
    run 2 "${train[@]}" --sparsifier topk --dgc-warmup-epochs 2 --out "$tmp/t"
    has "--dgc-warmup-epochs 2 needs --sparsifier dgc" ;;
  simulate_exdyna_options | train_exdyna_options)
    # --blocks and --initial-threshold reach ExDyna: 64 blocks over 2 partitions, and the paper
    # controller's first threshold is the one given.
    opts=(--controller paper --balance paper --blocks 64 --initial-threshold 0.02)
    if [ "$case_name" = simulate_exdyna_options ]; then
      run 0 "${sim[@]}" "${opts[@]}" --decisions "$tmp/d.csv"
      row=$(sed -n 2p "$tmp/d.csv" | cut -d, -f2,10,11)
    else
      run 0 "${train[@]}" "${opts[@]}" --out "$tmp/t"
      # by column name: the metrics CSV gains columns over time
      row=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i; next }
        NR == 2 { print $c["threshold"] "," $c["blocks_p0"] "," $c["blocks_p1"]; exit }' \
        "$tmp/t/iterations.csv")
    fi
    IFS=, read -r thr p0 p1 <<<"$row"
    echo "first threshold $thr, blocks $p0 + $p1"
    [ "$thr" = 0.02 ] || fail "first threshold is $thr, expected 0.02"
    [ $((p0 + p1)) -eq 64 ] || fail "partitions hold $((p0 + p1)) blocks, expected 64" ;;
  *) echo "unknown case $case_name"; exit 1 ;;
esac
echo PASS
