#!/usr/bin/env bash
# The tables of docs/sparsifiers.md: every registered sparsifier (and ExDyna's exact controller) on
# the synthetic source and on recorded traces, d = 0.01 and 0.001, from `exdyna simulate`
# summaries. In-process: the workers are threads sharing the machine's cores, so compare selection
# times within one column, not with another machine.
# usage: scripts/sparsifier_table.sh EXDYNA OUT.csv [TRACE_DIR...]   (a trace fixes its workers)
# Prints markdown tables (density / d, f(t), global error, selection ms, bytes), one column per setting; OUT.csv
# holds every figure. SPARSIFIERS="topk randomk" limits the rows (exdyna-exact is one of the names);
# SYNTHETIC_WORKERS="8 16" the synthetic settings.
set -euo pipefail
exdyna=$1 csv=$2
shift 2
traces=("$@")
names=$("$exdyna" simulate --help | sed -n 's/.*--sparsifier TEXT=[a-z-]* *sparsifier: //p' |
  tr -d ' ' | tr ',' ' ')
read -r -a variants <<<"${SPARSIFIERS:-$names exdyna-exact}"

args_of() {  # variant -> simulate arguments
  case $1 in
    exdyna-exact) echo "--sparsifier exdyna --controller exact --balance exact --worker-cap auto" ;;
    *) echo "--sparsifier $1" ;;
  esac
}
field() {  # summary line prefix -> its first number
  awk -v p="$1" 'index($0, p) == 1 { $0 = substr($0, length(p) + 1); print $1; exit }'
}
run() {  # setting-name d simulate-source-args...
  local name=$1 d=$2
  shift 2
  for v in "${variants[@]}"; do
    local out
    # shellcheck disable=SC2046
    if ! out=$("$exdyna" simulate $(args_of "$v") --density "$d" "$@" 2>&1); then
      echo "sparsifier_table.sh: $v on $name failed: $(tail -n 1 <<<"$out")" >&2
      exit 1
    fi
    printf '%s,%s,%s,%s,%s,%s,%s\n' "$name" "$v" "$(field 'actual density / target' <<<"$out")" \
      "$(field 'f(t)  ' <<<"$out")" "$(field 'global error (Eq. 1)' <<<"$out")" \
      "$(field 'selection time' <<<"$out")" \
      "$(field 'bytes per iteration' <<<"$out")" >>"$csv.part"
  done
}
echo "setting,sparsifier,density_over_d,f_t,global_error,selection_ms,bytes_per_iteration" >"$csv.part"
for w in ${SYNTHETIC_WORKERS:-8 16}; do
  for d in 0.01 0.001; do
    run "synthetic ${w}w d=$d" "$d" --workers "$w" --n-grad 1048576 --iterations 200
  done
done
for t in "${traces[@]}"; do
  w=$(sed -n 's/.*"workers": *\([0-9]*\).*/\1/p' "$t/meta.json")
  name=$(basename "$t")
  [[ $name == *"${w}w"* ]] || name="$name ${w}w"
  for d in 0.01 0.001; do run "$name d=$d" "$d" --trace "$t"; done
done
mv "$csv.part" "$csv"

table() {  # column title -> markdown pivot (rows: sparsifiers, columns: settings)
  awk -F, -v col="$1" -v title="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == col) c = i; next }
    { if (!($1 in seen)) { seen[$1] = 1; s[++ns] = $1 }
      if (!($2 in seenv)) { seenv[$2] = 1; v[++nv] = $2 }
      x[$1, $2] = $c }
    END { printf "| %s |", title; for (i = 1; i <= ns; ++i) printf " %s |", s[i]; print ""
      printf "|---|"; for (i = 1; i <= ns; ++i) printf "---:|"; print ""
      for (j = 1; j <= nv; ++j) { printf "| `%s` |", v[j]
        for (i = 1; i <= ns; ++i) printf " %s |", x[s[i], v[j]]; print "" } }' "$csv"
}
table density_over_d "density / d"
echo
table f_t "f(t)"
echo
table global_error "global error"
echo
table selection_ms "selection (ms)"
echo
table bytes_per_iteration "bytes per worker and iteration"
