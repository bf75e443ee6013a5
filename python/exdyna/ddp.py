"""exdyna as a DistributedDataParallel communication hook.

    import exdyna.ddp
    model = DistributedDataParallel(net)
    state = exdyna.ddp.State(density=0.01)            # process_group=None: DDP's default group
    model.register_comm_hook(state, exdyna.ddp.hook)

Every bucket's flat gradient goes through error feedback and the sparsifier over the process
group, and the hook returns a completed future of the averaged sparse update, which DDP writes back
into the parameters' gradients (identical on every rank). Each bucket keeps its own sparsifier
(residual, partitions, threshold), keyed by the bucket's index, its length and the shapes of its
parameters in order (a key that is the same after a restart, so checkpoints can name buckets).
DDP rebuilds its buckets after the first iteration, in gradient-ready order: a bucket whose key is
new gets a new sparsifier whose residual is gathered, parameter by parameter, from the buckets that
held those parameters before (so no accumulated gradient is lost; the threshold and partitions
start afresh, as they depend on the bucket's length), and at the end of each iteration (the bucket
DDP marks last) the sparsifiers of buckets not seen in it are dropped (`rebuilds` counts them).

state_dict() / load_state_dict() carry every bucket's state for checkpoints. A restored run
continues bit for bit when DDP's first bucket layout equals its rebuilt one (e.g. a model smaller
than DDP's 1 MB first bucket whose parameters are registered in gradient-ready order); otherwise
the restored run's first iteration, on DDP's first layout, runs on fresh sparsifiers and the loaded
states are picked up after DDP's rebuild.

The hook computes while it communicates (overlap=True, the default): it hands the bucket to the
State's one communication thread and returns a future at once, so the backward pass goes on
computing the gradients of earlier layers while this bucket is selected and exchanged; DDP waits
for every future before the optimizer step. The thread steps the buckets in the order DDP hands
them over, which is the same on every rank, so the collectives match across ranks; it holds the
GIL only between steps (the C++ step releases it). An error in a step (a timeout, a dead peer, a
non-finite gradient) is set on that bucket's future and raised by DDP in the step. overlap=False
steps each bucket on the autograd thread before the hook returns (for debugging); the decisions
are the same either way.

CUDA buckets (a model on the GPU, an NCCL group; a build with the GPU path, exdyna.cuda_built())
stay on the GPU: selection, exchange and update run there on torch's current stream, and only
counts cross to the host. There the sparsifier is "exdyna" (controller "paper" or "exact") or
"dense"; the others raise ValueError at the first step.
"""

import concurrent.futures
import contextlib

import torch

from . import Sparsifier, _resolve_group

__all__ = ["State", "hook", "bucket_key"]


def bucket_key(bucket):
    """(index, length, parameter shapes) of a DDP GradBucket, as text: the same on every rank and
    across restarts of the same model."""
    shapes = ";".join("x".join(str(d) for d in p.shape) for p in bucket.parameters())
    return f"{bucket.index()}:{bucket.buffer().numel()}:{shapes}"


class State:
    """Per-bucket sparsifiers for exdyna.ddp.hook.

    State(process_group=None, sparsifier="exdyna", density=0.01, overlap=True, **options): the
    arguments of exdyna.Sparsifier; a bad name, density or option raises ValueError here, before
    training. overlap: step the buckets on a communication thread while backward goes on (see
    the module's doc); False steps them on the autograd thread.

    After each step: stats (dict bucket index -> that bucket's last step statistics), and the
    running totals steps (hook calls), k_total (values selected), n_g_total (gradients seen) and
    bytes_total (bytes of the collectives, as the C++ communicator counts them); density() is
    k_total / n_g_total. rebuilds counts the buckets replaced after DDP rebuilt its buckets.
    """

    def __init__(self, process_group=None, sparsifier="exdyna", density=0.01, overlap=True,
                 **options):
        if not isinstance(overlap, bool):
            raise TypeError(f"overlap {overlap!r} is not a bool")
        self.overlap = overlap
        self._thread = None  # the communication thread, started on the first overlapped bucket
        self.process_group = _resolve_group(process_group)
        self.sparsifier = sparsifier
        self.target_density = density
        self.options = dict(options)
        # Validate now, not inside backward: building one costs no collective.
        self._make()
        self._buckets = {}  # bucket_key -> Sparsifier
        self._loaded = {}   # bucket_key -> state bytes not yet claimed by a bucket
        self._seen = set()  # keys seen in this iteration
        self._layout = {}   # bucket_key -> [(parameter data_ptr, offset, numel)]
        self.stats = {}
        self.steps = 0
        self.k_total = 0
        self.n_g_total = 0
        self.bytes_total = 0
        self.rebuilds = 0

    def _make(self):
        return Sparsifier(self.sparsifier, self.target_density, self.process_group, **self.options)

    def bucket_sparsifier(self, key, layout=None):
        """The sparsifier of the bucket with this key (see bucket_key), created on first use.
        layout: [(parameter data_ptr, offset, numel)] of the bucket, to carry residuals over when
        DDP re-lays out its buckets."""
        self._seen.add(key)
        sp = self._buckets.get(key)
        if sp is None:
            sp = self._make()
            if key in self._loaded:
                sp.load_state_dict({"state": self._loaded.pop(key)})
            elif layout is not None:
                self._carry_residual(sp, layout)
            self._buckets[key] = sp
            if layout is not None:
                self._layout[key] = layout
        return sp

    def submit(self, work):
        """Runs work() on the communication thread, after the work submitted before it."""
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="exdyna-comm")
        return self._thread.submit(work)

    def drain(self):
        """Waits until the communication thread has finished what was submitted."""
        if self._thread is not None:
            self._thread.submit(lambda: None).result()

    def _carry_residual(self, sp, layout):
        self.drain()  # the old buckets' residuals are final only once their steps are done
        where = {}
        for old_key, old_layout in self._layout.items():
            if old_key in self._buckets:
                for ptr, offset, numel in old_layout:
                    where[ptr] = (old_key, offset, numel)
        if not any(ptr in where for ptr, _, _ in layout):
            return
        residual = torch.zeros(sum(n for _, _, n in layout), dtype=torch.float32)
        old_residuals = {}
        for ptr, offset, numel in layout:
            if ptr not in where:
                continue
            old_key, old_offset, old_numel = where[ptr]
            if old_numel != numel:
                continue
            if old_key not in old_residuals:
                old_residuals[old_key] = self._buckets[old_key].residual()
            r = old_residuals[old_key]
            if r is not None:
                residual[offset:offset + numel] = r[old_offset:old_offset + numel]
        sp.set_residual(residual)

    def end_iteration(self):
        """Drops the sparsifiers of buckets not seen since the last call (DDP rebuilt them)."""
        stale = [k for k in self._buckets if k not in self._seen]
        for k in stale:
            del self._buckets[k]
            self._layout.pop(k, None)
        self.rebuilds += len(stale)
        self._seen = set()

    def buckets(self):
        """The keys of the live buckets."""
        return sorted(self._buckets)

    def density(self):
        return self.k_total / self.n_g_total if self.n_g_total else 0.0

    def record(self, index, stats):
        self.stats[index] = stats
        self.steps += 1
        self.k_total += stats["k_total"]
        self.n_g_total += stats["n_g"]
        self.bytes_total += stats["bytes"]["total"]

    def state_dict(self):
        buckets = dict(self._loaded)
        for k, sp in self._buckets.items():
            buckets[k] = sp.state_dict()["state"]
        return {"sparsifier": self.sparsifier, "density": self.target_density,
                "options": dict(self.options), "buckets": buckets,
                "totals": {"steps": self.steps, "k_total": self.k_total,
                           "n_g_total": self.n_g_total, "bytes_total": self.bytes_total}}

    def load_state_dict(self, state):
        """Restores every bucket; a bucket's state is applied when DDP first hands the hook that
        bucket (same key). Raises ValueError when the sparsifier, density or options
        differ from this State's."""
        for field, mine in (("sparsifier", self.sparsifier), ("density", self.target_density),
                            ("options", self.options)):
            if state.get(field) != mine:
                raise ValueError(f"state_dict {field} {state.get(field)!r} does not match this "
                                 f"State's {mine!r}")
        self._buckets = {}
        self._layout = {}
        self._loaded = dict(state["buckets"])
        self._seen = set()
        totals = state.get("totals", {})
        self.steps = totals.get("steps", 0)
        self.k_total = totals.get("k_total", 0)
        self.n_g_total = totals.get("n_g_total", 0)
        self.bytes_total = totals.get("bytes_total", 0)


def _layout(bucket):
    out, offset = [], 0
    for p in bucket.parameters():
        out.append((p.data_ptr(), offset, p.numel()))
        offset += p.numel()
    # Dense CPU buckets pack their gradients back to back; anything else carries nothing over.
    return out if offset == bucket.buffer().numel() else None


def _stream_of(buf):
    """A context that makes the stream buf's gradient was produced on (the hook caller's current
    stream) current in the communication thread too, so the step's kernels and collectives are
    ordered after it."""
    if not buf.is_cuda:
        return contextlib.nullcontext()
    return torch.cuda.stream(torch.cuda.current_stream(buf.device))


def hook(state, bucket):
    """The DDP communication hook: model.register_comm_hook(state, exdyna.ddp.hook)."""
    buf = bucket.buffer()
    if buf.dtype != torch.float32:
        raise TypeError(f"exdyna.ddp.hook: bucket dtype {buf.dtype} is not supported; expected "
                        "torch.float32 (keep the model in float32)")
    sp = state.bucket_sparsifier(bucket_key(bucket), _layout(bucket))
    index = bucket.index()
    if bucket.is_last():
        state.end_iteration()
    fut = torch.futures.Future()
    stream = _stream_of(buf)

    def step():
        try:
            with stream:
                update = sp.step(buf)
            state.record(index, sp.stats)
        except BaseException as e:  # noqa: B036 - the user sees it when DDP waits on the future
            fut.set_exception(e)
            return
        fut.set_result(update)

    if state.overlap:
        state.submit(step)
    else:
        step()
    return fut
