#!/usr/bin/env bash
# Runs README.md's "Install the Python package" block exactly as written: the fenced shell code
# between <!-- python-install:begin --> and <!-- python-install:end -->, with `bash -euo pipefail`
# (any failing command fails this script), in a fresh copy of the working tree (the files a clone
# would have once the changes were committed: tracked and untracked-but-not-ignored; no build/, no
# .venv), so the block makes its own venv and builds the extension itself. `scripts/test.sh --all`
# runs it. KEEP=1 keeps the copy (its path is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
begin='<!-- python-install:begin -->'
end='<!-- python-install:end -->'

block=$(awk -v b="$begin" -v e="$end" '
  $0 == b { inside = 1; next }
  $0 == e { inside = 0; next }
  inside && /^```/ { fence = !fence; next }
  inside && fence { print }
' README.md)
if [ -z "$block" ]; then
  echo "readme-python-block.sh: README.md has no fenced code between '$begin' and '$end'" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/exdyna-readme-block.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
copy=$work/exdyna
mkdir "$copy"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do
    if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi  # not the deleted ones
  done |
  tar --null --no-recursion -T - -cf - | tar -xf - -C "$copy"

printf '%s\n' "$block" >"$work/block.sh"
echo "readme-python-block.sh: running in $copy:"
sed 's/^/    /' "$work/block.sh"
# One BLAS thread per rank, as in scripts/test.sh (2-core CI machines).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
start=$SECONDS
if ! (cd "$copy" && bash -euo pipefail "$work/block.sh"); then
  echo "readme-python-block.sh: the README block failed after $((SECONDS - start)) s" >&2
  exit 1
fi
echo "readme-python-block.sh: the README block passed in $((SECONDS - start)) s"
