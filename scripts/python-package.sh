#!/usr/bin/env bash
# Installs the exdyna Python package the way a user does and runs tests/python against the
# installed copy: a venv over /usr/bin/python3 that sees Debian's python3-torch
# (--system-site-packages), `pip install --no-build-isolation .` (scikit-build-core builds the
# extension against that torch; pyproject.toml), then pytest from outside the source tree.
#
#   VENV     where the venv goes (default .venv)
#   PYTHON   the interpreter that has torch (default /usr/bin/python3)
#   EXDYNA_BIN  the exdyna command for the tests that drive it (default build/exdyna where built)
#
# scikit-build-core is not packaged in Debian 12: it and pybind11 come from PyPI into the venv
# when the venv lacks them.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(realpath -m "${VENV:-.venv}")
python=${PYTHON:-/usr/bin/python3}

if ! "$python" -c "import torch" 2>/dev/null; then
  echo "python-package.sh: $python cannot import torch (install python3-torch, or set PYTHON)" >&2
  exit 1
fi
[ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv"
if ! "$venv/bin/python" -c "import scikit_build_core, pybind11" 2>/dev/null; then
  "$venv/bin/pip" install --quiet "scikit-build-core>=0.10" "pybind11>=2.10"
fi
bash scripts/test-installed.sh "$venv"
