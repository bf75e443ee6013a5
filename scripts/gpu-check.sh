#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2030,SC2031  # functions run through bash -c; LOG is /dev/null in the pip subshell on purpose
# The GPU check: everything that needs a CUDA device, in one run of under 8 minutes on one H100
# (the lent machine: no network, no Debian dev packages; python3 with torch, pybind11,
# scikit-build-core, cmake, ninja, nvcc, compute-sanitizer).
#
#   bash scripts/gpu-check.sh OUTDIR
#
# Stages, each under its own timeout, each run whatever the earlier ones gave (a stage that needs
# an earlier one's product is recorded "skipped" with the reason):
#   env          nvidia-smi, nvcc, torch, cmake, the relevant pip packages, compute-sanitizer
#   configure    cmake -S . -B build-gpu -G Ninja -DEXDYNA_CUDA=ON (the rest of the harness off)
#   build        exdyna_cuda_check exdyna_cuda_bench
#   pip-install  a venv over python3's packages, pip install --no-build-isolation . with
#                EXDYNA_CUDA=ON (in the background from the start, beside the three below)
#   cuda-check   exdyna_cuda_check (every kernel against the CPU)
#   memcheck     the same under compute-sanitizer --tool memcheck (smaller sizes)
#   racecheck    the same under compute-sanitizer --tool racecheck, if time is left
#   kernel-bench exdyna_cuda_bench OUTDIR/kernels.json (after the pip build: quiet CPUs)
#   py-import    the installed package, from outside the source tree: exdyna.cuda_built()
#   py-errors    tests/gpu/python_errors.py: the refusals that cross the extension as Python
#                exceptions, one process each, a dying one's backtrace taken with cuda-gdb
#   py-errors-wheel  the same with a wheel built elsewhere (GPU_CHECK_WHEEL), in its own venv
#   race-links   only when GPU_CHECK_ONLY names it (about 6 minutes): GPUs over emulated links,
#                scripts/gpu-race-links.sh: scripts/gpu-links-probe.sh (namespaces, veth, tc, the
#                GPU inside a namespace; "skipped" with the failing command where refused), then
#                `exdyna compare --ddp --ddp-device cuda` with 4 hosts sharing the GPU over Gloo,
#                ResNet-18 and the transformer, allreduce, bf16, powersgd-r4, exdyna-d0.01, at 1
#                and 10 Gbit/s. Needs .gpu-data from scripts/gpu-race-prepare.sh, carried (the
#                exdyna command built without Debian's dev packages, Fashion-MNIST, the corpus)
#   pytest-cuda  tests/python/test_cuda.py with EXDYNA_REQUIRE_CUDA=1 (a skip is a failure)
#   bench-select bench/gpu/select_vs_topk.py --out OUTDIR/select_vs_topk.json
#   bench-ddp    bench/gpu/ddp_resnet18.py --out OUTDIR/ddp_resnet18.json
#   bench-ddp-ab bench/gpu/ddp_ab.py --out OUTDIR/ddp_ab.json: the DDP hook of this build and of
#                an earlier revision's (.gpu-ab/src, from scripts/gpu-ab-prepare.sh, carried;
#                pip-installed into its own venv beside the first build), interleaved; skipped
#                without .gpu-ab/src
#   pytest-cpu   the other tests of tests/python against the installed package, if time is left
#
# Writes into OUTDIR (at most 8 files): gpu-check.log (everything), results.json (every stage's
# status, exit code and seconds, the environment, the pytest results and the benchmarks' JSON),
# kernels.json, select_vs_topk.json, ddp_resnet18.json, ddp_ab.json, pytest-cuda.xml,
# pytest-cpu.xml; race-links adds race-links-report.md, race-links-summary.csv and
# race-links.tar.gz (so it runs alone: the device tool brings 8 files back).
#
# The race, prepared here and run there (15 minutes of device time: about 1.5 to start the
# machine, 2 to 3 for env and the CUDA pip build, 6 for the race):
#   bash scripts/gpu-race-prepare.sh      # here, once: .gpu-data (about 36 MiB)
#   device run, carry [".gpu-data"], timeout_s 600:
#   GPU_CHECK_ONLY=race-links GPU_CHECK_SKIP_CPP=1 GPU_CHECK_BUDGET_S=560 bash scripts/gpu-check.sh $OUT
# Ends with a short summary. Exit status 0 when every stage that ran passed, 1 otherwise.
#
# Environment: GPU_CHECK_BUDGET_S (default 450: the stages' time in all; each stage's timeout is
# cut to what is left), GPU_CHECK_ONLY (the stages to run, e.g. "pytest-cuda bench-ddp": a
# second run in a short slot; env, the pip builds and py-import always run), GPU_CHECK_JOBS
# (default nproc), GPU_CHECK_DDP_ARGS (more arguments of bench/gpu/ddp_resnet18.py, e.g.
# "--bucket-view both"), PYTHON (default python3), GPU_CHECK_VENV
# (default /tmp/venv), GPU_CHECK_QUICK=1 (the benchmarks' --quick), GPU_CHECK_CUDA (EXDYNA_CUDA of
# both builds, default ON; OFF or AUTO for a dry run of this script without nvcc),
# CUDA_CHECK_ARGS / MEMCHECK_ARGS (exdyna_cuda_check's arguments in the plain run and under the
# sanitizers; default none and --quick), GPU_CHECK_SKIP_CPP=1 (skip the C++ targets' stages, from
# configure to kernel-bench, already checked on this kind of machine), GPU_CHECK_WHEEL (a wheel of
# the package built on another machine: py-errors-wheel runs with it).
set -u

if [ $# -ne 1 ]; then
  echo "usage: bash scripts/gpu-check.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" || exit 2
OUTDIR=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO" || exit 2
LOG=$OUTDIR/gpu-check.log
: >"$LOG"
WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
STAGES=$WORK/stages.tsv
: >"$STAGES"
BUDGET=${GPU_CHECK_BUDGET_S:-450}
JOBS=${GPU_CHECK_JOBS:-$(nproc 2>/dev/null || echo 8)}
PY=${PYTHON:-python3}
VENV=${GPU_CHECK_VENV:-/tmp/venv}
VPY=$VENV/bin/python
BUILD=build-gpu
CUDA_MODE=${GPU_CHECK_CUDA:-ON} # EXDYNA_CUDA of both builds (AUTO: a dry run without nvcc)
QUICK=()
[ "${GPU_CHECK_QUICK:-0}" = 1 ] && QUICK=(--quick)
# exdyna_cuda_check's arguments: none for the plain run; --quick (no 25M inputs) under the
# sanitizers, which run the kernels many times slower (tests/gpu/cuda_check.cpp).
read -r -a CHECK_ARGS <<<"${CUDA_CHECK_ARGS:-}"
read -r -a MEMCHECK_ARGV <<<"${MEMCHECK_ARGS:---quick}"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 CMAKE_BUILD_PARALLEL_LEVEL=$JOBS
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 # nothing can be fetched there
START=$(date +%s)

say() { echo "$*" | tee -a "$LOG"; }
now() { date +%s.%N; }
left() { echo $((BUDGET - ($(date +%s) - START))); }

# record NAME STATUS RC SECONDS NOTE
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-}" >>"$STAGES"; }

status_of() { # the stage's status from its exit code
  case $1 in
    0) echo ok ;;
    77) echo skipped ;;
    124 | 137) echo timeout ;;
    *) echo fail ;;
  esac
}

stage_ok() { # whether stage $1 was recorded ok
  awk -F'\t' -v n="$1" '$1 == n && $2 == "ok" { f = 1 } END { exit !f }' "$STAGES"
}

# stage NAME CAP_S CMD...: runs CMD under timeout (CAP_S, or what is left of the budget), its
# output to stdout and the log; records status, exit code and seconds. Returns the exit code.
stage() {
  local name=$1 cap=$2
  shift 2
  if ! selected "$name"; then
    skip "$name" "not in GPU_CHECK_ONLY"
    return 77
  fi
  local t=$cap avail
  avail=$(($(left) - 10))
  ((avail < t)) && t=$avail
  if ((t < 15)); then
    say "=== [$name] skipped: out of time (${avail}s left of the budget)"
    record "$name" skipped "" 0 "out of time"
    return 77
  fi
  say ""
  say "=== [$name] $(date +%T) (limit ${t}s): $*"
  local s rc
  s=$(now)
  timeout -k 10 "$t" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  local dur
  dur=$(awk -v a="$s" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  local st
  st=$(status_of "$rc")
  say "=== [$name] $st (exit $rc, ${dur}s)"
  record "$name" "$st" "$rc" "$dur" "$([ "$st" = timeout ] && echo "killed after ${t}s")"
  return "$rc"
}

# GPU_CHECK_ONLY: the stages to run (space-separated); env, the pip builds and py-import, which
# the others need, always run.
selected() {
  [ -z "${GPU_CHECK_ONLY:-}" ] && return 0
  case " env pip-install pip-install-ab py-import $GPU_CHECK_ONLY " in
    *" $1 "*) return 0 ;;
  esac
  return 1
}

skip() { # skip NAME REASON
  say ""
  say "=== [$1] skipped: $2"
  record "$1" skipped "" 0 "$2"
}

# --- env -------------------------------------------------------------------------------------------
env_report() {
  echo "--- host"
  uname -a
  echo "cores: $(nproc)"
  free -g 2>/dev/null | head -2
  echo "--- nvidia-smi -L"
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null
  echo "--- nvcc --version"
  nvcc --version || ls /usr/local/cuda/bin/nvcc
  echo "--- compute-sanitizer: $(command -v compute-sanitizer || echo 'not on PATH')"
  echo "--- cmake --version"
  cmake --version | head -1
  echo "--- ninja $(ninja --version 2>/dev/null || echo 'not on PATH')"
  echo "--- $PY: $(command -v "$PY")"
  "$PY" - "$WORK/env.json" <<'EOF'
import json, subprocess, sys
env = {"python": sys.version.split()[0], "executable": sys.executable}
try:
    import torch
    env.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
               cuda_available=torch.cuda.is_available(),
               nccl=torch.distributed.is_nccl_available())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        env.update(device=p.name, sm=f"{p.major}.{p.minor}", multiprocessors=p.multi_processor_count,
                   memory_gib=round(p.total_memory / 2**30, 1))
except Exception as e:
    env["torch_error"] = repr(e)
for tool, args in (("nvcc", ["--version"]), ("cmake", ["--version"]), ("nvidia-smi", ["-L"])):
    try:
        out = subprocess.run([tool] + args, capture_output=True, text=True, timeout=20).stdout
        env[tool] = out.strip().splitlines()[-1 if tool == "nvcc" else 0] if out.strip() else ""
    except Exception as e:
        env[tool] = f"not run: {e}"
print(json.dumps(env, indent=2))
json.dump(env, open(sys.argv[1], "w"))
EOF
  echo "--- pip list (relevant)"
  "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|torchvision|pybind11|scikit[-_]build[-_]core|cmake|ninja|pytest|pytest-timeout|numpy|setuptools) '
  return 0
}
stage env 60 bash -c "$(declare -f env_report); PY='$PY' WORK='$WORK' env_report"

# --- the Python package, built in the background from the start (the longest build: it is on the
# critical path of the Python stages), while the C++ targets build and their checks run ----------
pip_install() {
  rm -rf "$VENV"
  "$PY" -m venv --system-site-packages "$VENV" || return 1
  # A venv made from a venv's python sees the base interpreter's packages, not that venv's:
  # hand the new one python3's own site directories (torch, pybind11, scikit-build-core, cmake).
  local site
  site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return 1
  "$PY" -c 'import site, sysconfig
dirs = site.getsitepackages() + [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
print("\n".join(dict.fromkeys(dirs)))' >"$site/_gpu_check_parent.pth" || return 1
  echo "venv $VENV; parent site directories:"
  cat "$site/_gpu_check_parent.pth"
  "$VPY" -c 'import torch, pybind11, scikit_build_core; print("torch", torch.__version__, "in the venv")' ||
    return 1
  # build-dir inside the tree (ignored: /build*/) so a rerun on the same machine is incremental.
  (cd "${SRC:-.}" && EXDYNA_CUDA="$CUDA_MODE" "$VPY" -m pip install --no-build-isolation --no-deps \
    --no-index -v --config-settings=cmake.define.EXDYNA_CUDA="$CUDA_MODE" \
    --config-settings=build-dir=build-pip .)
}
# The error probe with a wheel built elsewhere, in a venv of its own that sees what $VENV sees.
wheel_probe() {
  local w=/tmp/venv-wheel site_from site_to
  rm -rf "$w"
  "$VPY" -m venv --system-site-packages "$w" || return 1
  site_from=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return 1
  site_to=$("$w/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return 1
  cp "$site_from/_gpu_check_parent.pth" "$site_to/" || return 1
  "$w/bin/python" -m pip install -q --no-deps --no-index "$REPO/$WHEEL" || return 1
  cd /tmp && "$w/bin/python" "$REPO/tests/gpu/python_errors.py"
}
PIP_OUT=$WORK/pip.out
# stage() inside a background subshell: its output goes to PIP_OUT only, appended to the log at
# the join below, so it does not interleave with the checks' output.
(
  LOG=/dev/null
  stage pip-install 360 bash -c "$(declare -f pip_install); PY='$PY' VENV='$VENV' VPY='$VPY' CUDA_MODE='$CUDA_MODE' pip_install"
) >"$PIP_OUT" 2>&1 &
PIP_PID=$!
# The earlier revision of the A/B stage, built the same way into a venv of its own, beside it.
AB_SRC=$REPO/.gpu-ab/src
AB_VENV=/tmp/venv-ab
AB_OUT=$WORK/pip-ab.out
AB_PID=
if [ -f "$AB_SRC/pyproject.toml" ]; then
  (
    LOG=/dev/null
    stage pip-install-ab 360 bash -c "$(declare -f pip_install); PY='$PY' VENV='$AB_VENV' VPY='$AB_VENV/bin/python' CUDA_MODE='$CUDA_MODE' SRC='$AB_SRC' pip_install"
  ) >"$AB_OUT" 2>&1 &
  AB_PID=$!
fi

# --- the C++ CUDA targets --------------------------------------------------------------------------
# The harness (sim, engines, CLI, tests, benchmarks) needs Debian dev packages absent there: off.
SKIP_CPP=${GPU_CHECK_SKIP_CPP:-0}
if [ "$SKIP_CPP" = 1 ]; then BUILD=/nonexistent-skipped; fi
[ "$SKIP_CPP" = 1 ] && skip configure "GPU_CHECK_SKIP_CPP=1"
[ "$SKIP_CPP" = 1 ] || stage configure 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEXDYNA_CUDA="$CUDA_MODE" \
  -DEXDYNA_WITH_MPI=OFF -DEXDYNA_WITH_TORCH=OFF -DEXDYNA_WITH_PYTHON=OFF \
  -DEXDYNA_BUILD_TESTS=OFF -DEXDYNA_BUILD_BENCHMARKS=OFF
if [ "$SKIP_CPP" = 1 ]; then
  skip build "GPU_CHECK_SKIP_CPP=1"
elif stage_ok configure; then
  stage build 300 cmake --build "$BUILD" --target exdyna_cuda_check exdyna_cuda_bench -j "$JOBS"
else
  skip build "configure failed"
fi
CHECK=$BUILD/exdyna_cuda_check
BENCH=$BUILD/exdyna_cuda_bench

# --- the kernels' self-check, plain and under compute-sanitizer ------------------------------------
if [ -x "$CHECK" ]; then
  stage cuda-check 90 "$CHECK" "${CHECK_ARGS[@]}"
  if command -v compute-sanitizer >/dev/null 2>&1; then
    stage memcheck 180 compute-sanitizer --tool memcheck --error-exitcode 86 --print-limit 50 \
      "$CHECK" "${MEMCHECK_ARGV[@]}"
  else
    skip memcheck "compute-sanitizer not on PATH"
  fi
else
  skip cuda-check "no $CHECK (build failed)"
  skip memcheck "no $CHECK (build failed)"
fi

# --- join the pip build ----------------------------------------------------------------------------
wait "$PIP_PID"
{
  echo ""
  echo "=== [pip-install] output (run in the background)"
  cat "$PIP_OUT"
} >>"$LOG"
if [ -n "$AB_PID" ]; then
  wait "$AB_PID"
  {
    echo ""
    echo "=== [pip-install-ab] output ($(cat "$REPO/.gpu-ab/rev" 2>/dev/null), in the background)"
    cat "$AB_OUT"
  } >>"$LOG"
  grep '^=== \[pip-install-ab\] \(ok\|fail\|timeout\)' "$AB_OUT" || true
fi
echo ""
echo "=== [pip-install] last 40 lines (the whole output is in gpu-check.log)"
tail -n 40 "$PIP_OUT"

# racecheck only with time to spare: it runs far slower than memcheck
if [ -x "$CHECK" ] && command -v compute-sanitizer >/dev/null 2>&1 && (($(left) > 330)); then
  stage racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 86 --print-limit 50 \
    "$CHECK" "${MEMCHECK_ARGV[@]}"
else
  skip racecheck "not run (no check binary, no compute-sanitizer, or under 330 s left)"
fi

if [ -x "$BENCH" ]; then
  stage kernel-bench 90 "$BENCH" "$OUTDIR/kernels.json"
else
  skip kernel-bench "no $BENCH (build failed)"
fi

# --- the Python package on the GPU -----------------------------------------------------------------
# race-links runs only when GPU_CHECK_ONLY names it: its 6 minutes do not fit beside the rest.
# compare is stopped a minute before the budget ends (at most 330 s), so the report of the runs
# that finished is still written.
race_links() {
  case " ${GPU_CHECK_ONLY:-} " in
    *" race-links "*) ;;
    *)
      skip race-links "runs only when GPU_CHECK_ONLY names it (about 6 minutes)"
      return 0
      ;;
  esac
  local limit=$(($(left) - 60))
  ((limit > 330)) && limit=330
  stage race-links 400 bash -c "cd /tmp && RACE_PYTHON='$VPY' RACE_LIMIT_S=$limit \
    bash '$REPO/scripts/gpu-race-links.sh' '$OUTDIR'"
}

# Everything Python runs from /tmp, so `import exdyna` finds the installed package, not the tree.
if stage_ok pip-install; then
  stage py-import 60 bash -c "cd /tmp && '$VPY' -c 'import torch, exdyna
print(\"exdyna from\", exdyna.__file__)
print(\"cuda_built\", exdyna.cuda_built(), \"; cuda available\", torch.cuda.is_available())
assert exdyna.cuda_built(), \"the installed extension has no GPU path\"'"
  # How the module links the C++ runtime: its NEEDED libraries, and how many std:: symbols it
  # exports (a statically linked libstdc++ whose symbols leak crashed the refusals here once).
  stage py-linkage 30 bash -c "so=\$(cd /tmp && '$VPY' -c 'import exdyna._exdyna as m; print(m.__file__)') &&
    readelf -d \"\$so\" | grep NEEDED; echo exported std:: symbols: \$(nm -D --defined-only \"\$so\" | grep -c ' _ZNS[t]\\| _ZSt')"
  GDB=()
  command -v cuda-gdb >/dev/null 2>&1 && GDB=(--gdb cuda-gdb)
  stage py-errors 120 bash -c "cd /tmp && '$VPY' '$REPO/tests/gpu/python_errors.py' ${GDB[*]}"
  race_links
  if [ -n "${GPU_CHECK_WHEEL:-}" ]; then
    stage py-errors-wheel 90 bash -c "$(declare -f wheel_probe); VPY='$VPY' REPO='$REPO' WHEEL='$GPU_CHECK_WHEEL' wheel_probe"
  fi
  timeout_opt=()
  "$VPY" -c 'import pytest_timeout' >/dev/null 2>&1 && timeout_opt=(--timeout 170)
  stage pytest-cuda 200 bash -c "cd /tmp && EXDYNA_REQUIRE_CUDA=1 '$VPY' -m pytest -v -rfEs \
    -p no:cacheprovider ${timeout_opt[*]} --durations=8 --junitxml='$OUTDIR/pytest-cuda.xml' \
    '$REPO/tests/python/test_cuda.py'"
  stage bench-select 180 bash -c "cd /tmp && '$VPY' '$REPO/bench/gpu/select_vs_topk.py' \
    --out '$OUTDIR/select_vs_topk.json' ${QUICK[*]}"
  stage bench-ddp 150 bash -c "cd /tmp && '$VPY' '$REPO/bench/gpu/ddp_resnet18.py' \
    --out '$OUTDIR/ddp_resnet18.json' ${QUICK[*]} ${GPU_CHECK_DDP_ARGS:-}"
  if [ -z "$AB_PID" ]; then
    skip bench-ddp-ab "no .gpu-ab/src (scripts/gpu-ab-prepare.sh REV, carried)"
  elif stage_ok pip-install-ab; then
    stage bench-ddp-ab 200 bash -c "cd /tmp && '$VPY' '$REPO/bench/gpu/ddp_ab.py' --new '$VPY' \
      --old '$AB_VENV/bin/python' --old-rev '$(cat "$REPO/.gpu-ab/rev" 2>/dev/null)' \
      --out '$OUTDIR/ddp_ab.json' ${QUICK[*]}"
  else
    skip bench-ddp-ab "pip-install-ab did not succeed"
  fi
  # the CPU tests of the package (built by pip against this torch) with what time is left
  # -v: each test's outcome is in the log as it ends, so a run killed at its limit still shows
  # the tests that failed before (the summary counts them). Four processes where pytest-xdist is
  # installed: the suite is mostly multi-rank Gloo runs waiting on each other (over 150 s serial).
  xdist_opt=()
  "$VPY" -c 'import xdist' >/dev/null 2>&1 && xdist_opt=(-n 4)
  stage pytest-cpu 150 bash -c "cd /tmp && '$VPY' -m pytest -v -rfEs -p no:cacheprovider \
    ${xdist_opt[*]} ${timeout_opt[*]} --junitxml='$OUTDIR/pytest-cpu.xml' \
    --ignore='$REPO/tests/python/test_cuda.py' \
    '$REPO/tests/python'"
else
  for s in py-import race-links pytest-cuda bench-select bench-ddp pytest-cpu; do
    skip "$s" "pip-install did not succeed"
  done
fi

# --- results.json and the summary ------------------------------------------------------------------
"$PY" - "$OUTDIR" "$STAGES" "$WORK/env.json" "$(($(date +%s) - START))" "$LOG" <<'EOF' 2>&1 | tee -a "$LOG"
import csv, json, os, sys
import xml.etree.ElementTree as ET

out, stages_tsv, env_json, total, log = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
stages = []
for line in open(stages_tsv):
    name, status, rc, secs, note = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
    stages.append({"stage": name, "status": status, "exit": int(rc) if rc else None,
                   "seconds": float(secs or 0), "note": note})

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except Exception as e:
        return {"unreadable": f"{type(e).__name__}: {e}"}

def junit(path):
    try:
        root = ET.parse(path).getroot()
    except Exception:
        return None
    res = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failures": [], "seconds": 0.0}
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        res["seconds"] += float(case.get("time", 0) or 0)
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            res["failed" if bad.tag == "failure" else "errors"] += 1
            res["failures"].append({"test": name,
                                    "message": (bad.get("message") or "")[:1500]})
        elif case.find("skipped") is not None:
            res["skipped"] += 1
        else:
            res["passed"] += 1
    return res

def failed_in_log(stage):
    """The tests pytest -v reported FAILED or ERROR in a stage's part of the log."""
    bad, inside = [], False
    for line in open(log, errors="replace"):
        if line.startswith("=== ["):
            inside = line.startswith(f"=== [{stage}] ") and "(limit" in line
        elif inside and "::" in line and (" FAILED" in line or " ERROR" in line):
            # "path::test FAILED [ 5%]", or with pytest-xdist "[gw1] [ 5%] FAILED path::test"
            bad.append(next(w for w in line.split() if "::" in w))
    return bad

# racecheck and pytest-cpu run on what time is left: their timeout fails nothing, unless a test
# had failed before it
optional = ("racecheck", "pytest-cpu")
killed_failures = failed_in_log("pytest-cpu")
results = {
    "ok": all(s["status"] in ("ok", "skipped") or
              (s["status"] == "timeout" and s["stage"] in optional and
               not (s["stage"] == "pytest-cpu" and killed_failures)) for s in stages) and
          any(s["stage"] == "pytest-cuda" and (s["status"] == "ok" or
                                                s["note"] == "not in GPU_CHECK_ONLY")
              for s in stages),
    "total_seconds": total,
    "stages": stages,
    "env": load(env_json),
    "pytest_cuda": junit(os.path.join(out, "pytest-cuda.xml")),
    "pytest_cpu": junit(os.path.join(out, "pytest-cpu.xml")),
    "pytest_cpu_failed_before_limit": killed_failures,
    "kernels": load(os.path.join(out, "kernels.json")),
    "select_vs_topk": load(os.path.join(out, "select_vs_topk.json")),
    "ddp_resnet18": load(os.path.join(out, "ddp_resnet18.json")),
    "ddp_ab": load(os.path.join(out, "ddp_ab.json")),
    "race_links": (list(csv.DictReader(open(os.path.join(out, "race-links-summary.csv"))))
                   if os.path.exists(os.path.join(out, "race-links-summary.csv")) else None),
}
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(results, f, indent=2)

env = results["env"] or {}
print("\n" + "=" * 100)
print(f"GPU CHECK SUMMARY  {env.get('device', '?')}  torch {env.get('torch', '?')} "
      f"(CUDA {env.get('torch_cuda', '?')})  {env.get('nvcc', '')}  total {total} s")
for s in stages:
    print(f"  {s['stage']:<13} {s['status']:<8} exit {str(s['exit']):>4}  {s['seconds']:7.1f} s  "
          f"{s['note']}")
for key in ("pytest_cuda", "pytest_cpu"):
    r = results[key]
    if r:
        print(f"  {key}: {r['passed']} passed, {r['failed']} failed, {r['errors']} errors, "
              f"{r['skipped']} skipped")
        for fl in r["failures"][:6]:
            print(f"    FAILED {fl['test']}: {fl['message'][:400]}")
if killed_failures and not results["pytest_cpu"]:
    print(f"  pytest_cpu (killed at its limit): failed before: {', '.join(killed_failures[:6])}")
k = results["kernels"]
if isinstance(k, dict):
    print("  kernels.json: " + json.dumps(k)[:1200])
sv = results["select_vs_topk"]
if isinstance(sv, dict):
    for row in sv.get("sizes", []):
        if "ratios" in row:
            med = {n: row[n]["median_ms"] for n in ("copy", "select_partition", "select_whole",
                                                   "topk", "nonzero", "step_exdyna_exact",
                                                   "step_exdyna_paper", "step_topk")
                   if isinstance(row.get(n), dict) and "median_ms" in row[n]}
            print(f"  select_vs_topk n_g {row['n_g']:,}: "
                  + ", ".join(f"{n} {v:.3f} ms" for n, v in med.items()))
            print("    " + ", ".join(f"{n} {v:.2f}" for n, v in row["ratios"].items()))
            chk = row.get("select_check", {})
            if "matches_nonzero" in chk:
                print(f"    select == nonzero: {chk['matches_nonzero']}")
        elif "skipped" in row:
            print(f"  select_vs_topk n_g {row['n_g']:,}: skipped: {row['skipped']}")
    for e in sv.get("errors", [])[:5]:
        print(f"    error: {e[:300]}")
dd = results["ddp_resnet18"]
if isinstance(dd, dict):
    for n, v in dd.get("variants", {}).items():
        extra = f"  density {v['hook']['density']:.5f}" if "hook" in v else ""
        rounds = ", ".join(f"{m:.2f}" for m in v.get("round_medians_ms", []))
        print(f"  ddp_resnet18 {n:<15} " + (f"{v['median_ms']:.2f} ms/step (rounds {rounds}){extra}"
                                            if "median_ms" in v else f"ERROR {v.get('error')}"))
        if "phases" in v:
            print("    phases: " + ", ".join(f"{k} {x:.2f}" for k, x in v["phases"].items()
                                           if k != "step"))
    for n, v in dd.get("ratios", {}).items():
        print(f"    {n} {v:.3f}")
ab = results["ddp_ab"]
if isinstance(ab, dict):
    for side, b in ab.get("builds", {}).items():
        label = "this build" if side == "new" else ab.get("old_rev", "?")[:10]
        print(f"  ddp_ab {label:<10} " + ", ".join(
            f"{v} {x['median_ms']:.2f}" for v, x in b.get("variants", {}).items()) + "; " +
            ", ".join(f"{k} {r:.3f}" for k, r in b.get("ratios", {}).items()))
    for e in ab.get("errors", [])[:3]:
        print(f"    error: {e[:300]}")
for r in results["race_links"] or []:
    ttt = f"{float(r['time_to_target_s']):.1f} s" if r["time_to_target_s"] else "not reached"
    print(f"  race {r['model']:<11} {r['bandwidth']:<7} {r['hook']:<13} {r['status']:<6} "
          f"step {r['step_ms'] or '-'} ms, to target {ttt}" + (f"  {r['why'][:200]}" if r["why"] else ""))
print(f"  files: {', '.join(sorted(os.listdir(out)))}")
print(f"GPU CHECK {'PASSED' if results['ok'] else 'FAILED'}")
sys.exit(0 if results["ok"] else 1)
EOF
rc=${PIPESTATUS[0]}
if [ "$rc" -gt 1 ] || [ ! -s "$OUTDIR/results.json" ]; then
  echo "gpu-check: the summary failed (exit $rc); the stages:" | tee -a "$LOG"
  tee -a "$LOG" <"$STAGES"
  rc=1
fi
rm -rf "$WORK"
exit "$rc"
