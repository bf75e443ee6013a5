"""The refusals that cross the extension's boundary as Python exceptions, each in a process of its
own (so one that kills its process is named, not the whole run): a constructor's ValueError (a
bad density), a step's ValueError on a CUDA tensor (a sparsifier or controller with no GPU path,
the latter after building the sparsifier), a CPU step's ValueError with numbers in its message.

    python tests/gpu/python_errors.py [--gdb GDB]

Prints one line per case (ok / wrong / died with signal N) and exits 1 when one is not ok. With
--gdb (e.g. cuda-gdb), a case that dies is run again under it in batch mode and its backtrace is
printed, so a crash in the extension says where it is."""

import argparse
import subprocess
import sys

CASES = {
    "ctor_density": "exdyna.Sparsifier('exdyna', density=0)",
    "ctor_controller": "exdyna.Sparsifier('exdyna', 0.01, controller='fast')",
    "cpu_length": "s = exdyna.Sparsifier('topk', 0.1); s.step(torch.ones(100)); "
                  "s.step(torch.ones(101))",
    "cuda_topk": "exdyna.Sparsifier('topk', 0.01).step(torch.ones(10000, device='cuda'))",
    "cuda_histogram": "exdyna.Sparsifier('exdyna', 0.01, controller='histogram')"
                      ".step(torch.ones(10000, device='cuda'))",
    "cuda_histogram_large": "exdyna.Sparsifier('exdyna', 0.01, controller='histogram')"
                            ".step(torch.ones(100000, device='cuda'))",
}

PRELUDE = """
import faulthandler, tempfile, torch, torch.distributed as dist, exdyna
faulthandler.enable()
dist.init_process_group('gloo', init_method='file://' + tempfile.mktemp(), rank=0, world_size=1)
try:
    {case}
except ValueError as e:
    print('raised ValueError:', e)
    raise SystemExit(0)
raise SystemExit('no ValueError')
"""


def run(case, gdb):
    code = PRELUDE.format(case=CASES[case])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if p.returncode == 0:
        print(f"{case:22s} ok: {p.stdout.strip().splitlines()[-1][:150]}")
        return True
    if p.returncode > 0:
        print(f"{case:22s} wrong (exit {p.returncode}): {(p.stdout + p.stderr).strip()[-400:]}")
        return False
    print(f"{case:22s} died with signal {-p.returncode}:\n{p.stderr.strip()[-1500:]}")
    if gdb:
        g = subprocess.run([gdb, "-batch", "-ex", "run", "-ex", "bt 40", "--args", sys.executable,
                            "-c", code], capture_output=True, text=True, timeout=90)
        print(f"--- {gdb} backtrace of {case}:\n{g.stdout[-6000:]}\n{g.stderr[-1500:]}")
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gdb", help="a gdb (cuda-gdb) to take a dying case's backtrace with")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated, of: " +
                    ", ".join(CASES))
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; expected some of {list(CASES)}")
    results = []
    for c in cases:  # a backtrace of the first case that dies only: the others cost its time again
        results.append(run(c, a.gdb if all(results) else None))
    print(f"python_errors: {sum(results)} of {len(results)} ok")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
