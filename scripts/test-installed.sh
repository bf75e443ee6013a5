#!/usr/bin/env bash
# Installs this tree's exdyna into a venv that has torch (`pip install --no-build-isolation .`,
# built against that torch) and runs tests/python against the installed copy, from a temporary
# directory so that `import exdyna` can only be the installed package. What
# scripts/python-package.sh (Debian's torch) and scripts/torch2-venv.sh (PyPI's torch 2.x) share.
#
#   bash scripts/test-installed.sh VENV [pytest arguments]
#
#   EXDYNA_BIN  the exdyna command for the tests that drive it (default build/exdyna where built)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bash scripts/test-installed.sh VENV [pytest arguments]" >&2; exit 2; }
venv=$(realpath -m "$1")
shift
cd "$(dirname "$0")/.."
root=$(pwd)
"$venv/bin/pip" install --quiet --no-build-isolation .

if [ -z "${EXDYNA_BIN:-}" ] && [ -x build/exdyna ]; then
  export EXDYNA_BIN=$root/build/exdyna
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$venv/bin/python" -c "import exdyna, exdyna.ddp; print('exdyna from', exdyna.__file__)"
PYTHONDONTWRITEBYTECODE=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  --rootdir "$root/tests/python" "$root/tests/python" "$@"
