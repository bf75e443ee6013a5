#!/usr/bin/env bash
# The Python package under PyPI's torch 2.x, on CPU: a venv over /usr/bin/python3 that does NOT see
# Debian's torch 1.13, with torch 2.x, scikit-build-core, pybind11, pytest, Lightning,
# Accelerate and TensorBoard from PyPI; then `pip install --no-build-isolation .` (the extension
# compiles against that torch) and pytest tests/python from outside the source tree against the
# installed package (test_frameworks.py runs the Lightning and Accelerate examples there,
# test_conventions.py torch.compile and TensorBoard, test_amp.py CPU GradScaler; under
# scripts/python-package.sh's Debian torch they skip).
#
#   VENV     where the venv goes (default .venv-torch2)
#   PYTHON   the interpreter the venv is made over (default /usr/bin/python3)
#   TORCH    the torch requirement (default torch==2.15.0, the newest on PyPI when this was written)
#   EXDYNA_BIN  the exdyna command for the tests that drive it (default build/exdyna where built)
#
# PyPI's Linux torch is the CUDA build: it does not import without its nvidia-* and cuda-*
# dependencies (libtorch_cuda.so links libcufile, libcusparseLt, libnvshmem_host, cuDNN, NCCL...),
# so they are installed too: the venv is 5.5 GB (torch 2.15.0: nvidia 3.0 GB, torch 1.2 GB, triton
# 1.0 GB). It runs on CPU all the same. EXDYNA_CUDA (environment) passes through to the build as in
# pyproject.toml. "$@" goes to pytest (e.g. -k frameworks).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(realpath -m "${VENV:-.venv-torch2}")
python=${PYTHON:-/usr/bin/python3}
torch_req=${TORCH:-torch==2.15.0}

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
if ! "$venv/bin/python" -c "import torch, scikit_build_core, pybind11, pytest, lightning, accelerate, \
tensorboard" 2>/dev/null; then
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet "$torch_req" "scikit-build-core>=0.10" "pybind11>=2.10" pytest \
    lightning accelerate tensorboard
fi
"$venv/bin/python" -c "import torch, lightning, accelerate; print('torch', torch.__version__, \
'lightning', lightning.__version__, 'accelerate', accelerate.__version__)"
bash scripts/test-installed.sh "$venv" "$@"
