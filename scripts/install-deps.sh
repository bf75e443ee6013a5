#!/usr/bin/env bash
# Installs every Debian package exdyna needs. Idempotent and non-interactive; run as root
# (or with sudo available) on Debian 12.
# libopenblas0-pthread: Debian's libtorch calls the BLAS behind libblas.so.3, which without it is
# the reference BLAS (80x200 times 200x10,000: 210 ms against 7). Not the serial variant: it is not
# safe to call from two threads at once (`exdyna train --backend local`, whose workers are threads,
# gave a different result each run); the launchers give each rank one BLAS thread
# (OPENBLAS_NUM_THREADS=1). python3.11-doc: the English text of the DDP LSTM. python3-venv: the
# README's install block (`/usr/bin/python3 -m venv`; Debian's python3 has no ensurepip without it).
set -euo pipefail
packages=(
  build-essential cmake ninja-build git clang-format
  clang libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  libtorch-dev libgloo-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  dataset-fashion-mnist gnuplot-nox
  iproute2 nftables
  python3-torch python3-venv pybind11-dev python3-pytest python3.11-doc
  libopenblas0-pthread
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
