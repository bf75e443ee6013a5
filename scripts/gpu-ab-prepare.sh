#!/usr/bin/env bash
# Puts an earlier revision's tree beside this one for scripts/gpu-check.sh's A/B stage, which
# builds it as a second package and times the DDP hook of both builds, interleaved, on the GPU
# machine (bench/gpu/ddp_ab.py): a change in the hook's cost told apart from a change of machine.
#
#   bash scripts/gpu-ab-prepare.sh REV     # writes .gpu-ab/src (ignored) and .gpu-ab/rev
#
# The device call then names .gpu-ab in carry (the working tree sends no ignored path); without
# .gpu-ab/src the stage is skipped.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: bash scripts/gpu-ab-prepare.sh REV" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
rev=$(git rev-parse --verify --quiet "$1^{commit}") || {
  echo "gpu-ab-prepare: '$1' is not a commit of this repository" >&2
  exit 2
}
rm -rf .gpu-ab
mkdir -p .gpu-ab/src
git archive "$rev" | tar -x -C .gpu-ab/src
echo "$rev" >.gpu-ab/rev
echo "gpu-ab-prepare: .gpu-ab/src is $(git log -1 --format='%h %s' "$rev" | cut -c1-90)"
echo "gpu-ab-prepare: $(du -sh .gpu-ab | cut -f1); name .gpu-ab in the device call's carry"
