#!/usr/bin/env python3
"""DDP step time of a word LSTM language model on W Gloo ranks over loopback: DDP's own all-reduce
against exdyna.ddp.hook, overlapped (the default) and synchronous.

The model is the communication-heavy one of the DDP comparison (examples/ddp_hooks.py's, imported
from there): an embedding of the V most frequent words of the English text under
/usr/share/doc/python3.11/html/_sources (python3.11-doc), a 2-layer LSTM and an output layer tied to
nothing (about 4.6M parameters at V = 10,000, E = H = 200). Each rank trains on its own slice of the
corpus: batch --batch sequences of --bptt words, SGD (lr 1, gradient clipping 0.25). Each variant
builds the model afresh from the same seed, runs --warmup untimed steps, then --steps timed ones; a
step is forward, backward (with the hook) and the optimizer, and its time is rank 0's wall clock.
  allreduce      DDP with no hook (its C++ all-reduce of every bucket)
  exdyna         exdyna.ddp.hook, State(density=--density), the exact controller, overlapped
  exdyna_sync    the same with State(overlap=False)
Over loopback the wire is memory, so the ratios are what the hook costs in computation and in the
waits it adds to the backward pass, not what it saves on a network.

    python3 bench/ddp/ddp_lstm_loopback.py --out lstm.json
    python3 bench/ddp/ddp_lstm_loopback.py --quick     # V 2,000, 2 ranks, 3 + 5 steps
Exit status: 0 measured, 1 a variant failed, 2 bad arguments, 77 no corpus or no exdyna.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

CORPUS = "/usr/share/doc/python3.11/html/_sources"
VARIANTS = ("allreduce", "exdyna", "exdyna_sync")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="FILE", help="write the results as JSON to FILE")
    p.add_argument("--quick", action="store_true", help="V 2,000, 2 ranks, 3 + 5 steps")
    p.add_argument("--ranks", type=int, help="Gloo ranks on this machine (default 4)")
    p.add_argument("--vocab", type=int, help="words in the vocabulary (default 10,000)")
    p.add_argument("--batch", type=int, default=20, help="sequences per rank and step (default 20)")
    p.add_argument("--bptt", type=int, default=35, help="words per sequence (default 35)")
    p.add_argument("--steps", type=int, help="timed steps (default 20)")
    p.add_argument("--warmup", type=int, help="untimed steps first (default 5)")
    p.add_argument("--density", type=float, default=0.01, help="exdyna's d (default 0.01)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, from {', '.join(VARIANTS)}")
    a = p.parse_args(argv)
    a.ranks = a.ranks or (2 if a.quick else 4)
    a.vocab = a.vocab or (2000 if a.quick else 10000)
    a.steps = a.steps or (5 if a.quick else 20)
    a.warmup = a.warmup if a.warmup is not None else (3 if a.quick else 5)
    a.variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in a.variants if v not in VARIANTS]
    if bad:
        p.error(f"--variants: unknown {bad}; expected {', '.join(VARIANTS)}")
    if not 0 < a.density <= 1:
        p.error(f"--density {a.density} is not in (0, 1]")
    if a.ranks < 1 or a.vocab < 100 or a.batch < 1 or a.bptt < 2 or a.steps < 1 or a.warmup < 0:
        p.error("--ranks >= 1, --vocab >= 100, --batch >= 1, --bptt >= 2, --steps >= 1, "
                "--warmup >= 0")
    return a


def word_lstm_example():
    """examples/ddp_hooks.py, the head-to-head's training script: its word LSTM and corpus reader
    are the ones measured here."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "examples"))
    import ddp_hooks
    return ddp_hooks


def rank_main(rank, args, ids, store, variant, queue):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=args.ranks, timeout=datetime.timedelta(seconds=300))
    try:
        torch.manual_seed(0)
        model = DDP(word_lstm_example().WordLstm(args.vocab))
        state = None
        if variant != "allreduce":
            import exdyna.ddp
            state = exdyna.ddp.State(density=args.density, overlap=variant == "exdyna")
            model.register_comm_hook(state, exdyna.ddp.hook)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        data = ids
        span = args.batch * (args.bptt + 1)
        per_rank = len(ids) // args.ranks
        times = []
        for step in range(args.warmup + args.steps):
            start = rank * per_rank + (step * span) % max(per_rank - span, 1)
            chunk = data[start:start + span].view(args.batch, args.bptt + 1)
            t0 = time.perf_counter()
            opt.zero_grad()
            logits = model(chunk[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, args.vocab),
                                                     chunk[:, 1:].reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            if step >= args.warmup:
                times.append(time.perf_counter() - t0)
        if rank == 0:
            out = {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times),
                   "max_ms": 1e3 * max(times), "steps": len(times), "last_loss": float(loss),
                   "parameters": sum(p.numel() for p in model.parameters())}
            if state is not None:
                out["density"] = state.actual_density()
                out["bytes_per_step"] = state.bytes_total / max(state.iter, 1)
                out["dense_bytes_per_step"] = state.dense_bytes_total / max(state.iter, 1)
            queue.put(out)
    finally:
        dist.destroy_process_group()


def run_variant(args, ids, variant):
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    store = os.path.join(tempfile.mkdtemp(prefix="exdyna-lstm-"), "store")
    procs = [ctx.Process(target=rank_main, args=(r, args, ids, store, variant, queue))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=1800)
    failed = [(i, p.exitcode) for i, p in enumerate(procs) if p.exitcode != 0]
    if failed:
        for p in procs:
            if p.is_alive():
                p.terminate()
        raise RuntimeError(f"ranks (rank, exit code) {failed} failed")
    return queue.get(timeout=10)


def main(argv=None):
    args = parse_args(argv)
    result = {"bench": "ddp_lstm_loopback", "ranks": args.ranks, "vocab": args.vocab,
              "batch": args.batch, "bptt": args.bptt, "steps": args.steps,
              "warmup": args.warmup, "density": args.density, "variants": {}, "errors": []}
    try:
        import torch
        import exdyna
    except ImportError as e:
        print(f"ddp_lstm_loopback: needs torch and exdyna: {e}")
        return 77
    if not os.path.isdir(CORPUS):
        print(f"ddp_lstm_loopback: no corpus at {CORPUS} (install python3.11-doc)")
        return 77
    result["torch"] = torch.__version__
    result["exdyna_cuda_built"] = exdyna.cuda_built()
    ids = word_lstm_example().corpus_ids(args.vocab, "")
    result["corpus_words"] = len(ids)
    for v in args.variants:
        try:
            result["variants"][v] = run_variant(args, ids, v)
            print(f"  {v:<12} {result['variants'][v]['median_ms']:8.1f} ms/step", flush=True)
        except Exception as e:
            result["errors"].append(f"{v}: {type(e).__name__}: {e}")
            result["variants"][v] = {"error": f"{type(e).__name__}: {e}"}
    ref = result["variants"].get("allreduce", {}).get("median_ms")
    result["ratios"] = {f"{v}_over_allreduce": r["median_ms"] / ref
                        for v, r in result["variants"].items()
                        if ref and v != "allreduce" and "median_ms" in r}
    for k, r in result["ratios"].items():
        print(f"    {k} {r:.3f}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(json.dumps(result, indent=2) + "\n")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
