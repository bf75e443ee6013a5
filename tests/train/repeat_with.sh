#!/usr/bin/env bash
# A Gloo run's summary names the log-round switch it ran with (measured at the start, so it can
# differ between runs, and with it the all-reduce's order of float additions): repeat_with.
# Two runs with that setting end with bit-identical parameters; a local run has no switch (null).
set -euo pipefail
exe="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(train --dataset synthetic --model tiny --workers 2 --max-steps 30 --batch-size 16
      --density 0.05 --no-progress --no-plots)
field() { grep -o "\"$2\": \(\"[^\"]*\"\|null\)" "$1/summary.json" | cut -d' ' -f2- | tr -d '"'; }

"$exe" "${args[@]}" --backend gloo --out "$dir/first" > /dev/null
setting=$(field "$dir/first" repeat_with)
echo "first run: repeat_with $setting"
[[ "$setting" =~ ^EXDYNA_GLOO_LOG_BELOW=[0-9]+,[0-9]+$ ]] || { echo "no switch named"; exit 1; }
for r in a b; do
  env "$setting" "$exe" "${args[@]}" --backend gloo --out "$dir/$r" > /dev/null
  [ "$(field "$dir/$r" repeat_with)" = "$setting" ] || { echo "run $r took another switch"; exit 1; }
done
a=$(field "$dir/a" params_fnv1a)
b=$(field "$dir/b" params_fnv1a)
echo "repeated: $a and $b"
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "the repeated runs differ"; exit 1; }
"$exe" "${args[@]}" --backend local --out "$dir/local" > /dev/null
[ "$(field "$dir/local" repeat_with)" = null ] || { echo "a local run names a switch"; exit 1; }
