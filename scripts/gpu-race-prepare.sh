#!/usr/bin/env bash
# Prepares the race of GPUs over emulated links (scripts/gpu-race-links.sh, gpu-check.sh's stage
# race-links) for a machine that has neither Debian's dev packages nor its data packages: writes
# .gpu-data/ (ignored by git), which the device tool carries (`carry: [".gpu-data"]`):
#
#   .gpu-data/bin/exdyna                        the exdyna command, built here without libtorch,
#                                               MPI and Python, libstdc++ and libgcc linked in: it
#                                               needs only glibc (this machine's version or newer)
#   .gpu-data/fashion-mnist/*.gz                Fashion-MNIST (Debian's dataset-fashion-mnist)
#   .gpu-data/python3.11-doc-sources.tar.gz     the transformer's corpus (python3.11-doc's _sources)
#
#   bash scripts/gpu-race-prepare.sh
#
# Builds in build-gpu-race-cli/ (ignored). About 36 MiB in all, under the tool's 64 MiB. Exit 0
# when every part is in place and the command starts; 1 with the reason otherwise.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
BUILD=build-gpu-race-cli
DATA=.gpu-data
FASHION=/usr/share/datasets/fashion-mnist
DOCS=/usr/share/doc/python3.11/html

fail() {
  echo "gpu-race-prepare: $*" >&2
  exit 1
}

[ -f "$FASHION/train-images-idx3-ubyte.gz" ] || fail "no Fashion-MNIST under $FASHION (apt install dataset-fashion-mnist)"
[ -d "$DOCS/_sources" ] || fail "no corpus under $DOCS/_sources (apt install python3.11-doc)"

# The harness alone (CLI11 and nlohmann-json, header-only): compare --ddp needs no libtorch, since
# the ranks are Python processes.
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEXDYNA_CUDA=OFF \
  -DEXDYNA_WITH_MPI=OFF -DEXDYNA_WITH_TORCH=OFF -DEXDYNA_WITH_PYTHON=OFF \
  -DEXDYNA_BUILD_TESTS=OFF -DEXDYNA_BUILD_BENCHMARKS=OFF \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$BUILD" --target exdyna -j "${JOBS:-$(nproc)}"

mkdir -p "$DATA/bin" "$DATA/fashion-mnist"
install -m 755 -s "$BUILD/exdyna" "$DATA/bin/exdyna"
cp "$FASHION"/*-ubyte.gz "$DATA/fashion-mnist/"
tar -czf "$DATA/python3.11-doc-sources.tar.gz" -C "$DOCS" _sources

# Only glibc's libraries may be left: the GPU machine's image has no others of this one's.
others=$(ldd "$DATA/bin/exdyna" | awk '$1 !~ /^(linux-vdso|libc\.|libm\.|ld-linux|\/lib64\/ld-linux|libpthread|libdl|librt)/ { print $1 }')
[ -z "$others" ] || fail "$DATA/bin/exdyna needs more than glibc: $others"
"$DATA/bin/exdyna" compare --help >/dev/null || fail "$DATA/bin/exdyna does not start"
echo "gpu-race-prepare: $DATA ready ($(du -sh "$DATA" | cut -f1)): exdyna needs glibc" \
  "$(ldd --version | head -1 | awk '{ print $NF }') or newer; carry it with carry: [\"$DATA\"]"
