"""exdyna as a DistributedDataParallel communication hook.

    import exdyna.ddp
    model = DistributedDataParallel(net, gradient_as_bucket_view=True)  # no copy after the hook
    state = exdyna.ddp.State(density=0.01)            # process_group=None: DDP's default group
    model.register_comm_hook(state, exdyna.ddp.hook)

Every bucket's flat gradient goes through error feedback and the sparsifier over the process
group, and the hook returns a completed future of the averaged sparse update, written into the
bucket's buffer (in place, as DDP's own hooks), which DDP writes back into the parameters'
gradients (identical on every rank). Each bucket keeps its own sparsifier
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
refused non-finite gradient) is set on that bucket's future and raised by DDP, with the step's own
message, from backward. overlap=False
steps each bucket on the autograd thread before the hook returns (for debugging); the decisions
are the same either way.

CUDA buckets (a model on the GPU, an NCCL group; a build with the GPU path, exdyna.cuda_built())
stay on the GPU, and only counts cross to the host. Overlapped, a bucket's step runs on the State's
own stream of that device (ordered after the stream that produced the bucket): its waits for the
counts stop only the communication thread, while the backward kernels queued on the caller's
stream keep the GPU busy; the future is CUDA-aware, so DDP's use of the update is ordered after
it. overlap=False runs the step on the caller's current stream. There the sparsifier is "exdyna"
(controller "paper" or "exact") or "dense"; the others raise ValueError at the first step.
"""

import collections
import concurrent.futures
import contextlib
import math
import warnings

import torch
import torch.distributed as dist

from . import Sparsifier, _backend, _check_argument_types, _exdyna, _resolve_group
from . import log as exdyna_log
from ._dense_fallback import DenseFallback

__all__ = ["State", "hook", "bucket_key"]

# Below this density the State warms the density up by default (warmup_steps unless given): at
# d = 0.001 a CNN with SGD momentum 0.9 diverged without it (docs/python.md, "When the accuracy
# lags"); above it nothing diverged, and the default keeps d from the first step.
AUTO_WARMUP_BELOW = 0.005
AUTO_WARMUP_STEPS = 100
# Below it the buckets also clip each update's norm (step_clip, unless given): without it 3 of 7
# seeds of that CNN still collapsed after the 100-step warm-up.
AUTO_STEP_CLIP = 1.0


def _hook_options(options, density):
    """The options a hook's sparsifier is made with: the given ones, Eq. 1's global error off
    unless asked for (an all-reduce, and on the GPU two waits, per step on the path the training
    waits for), and below AUTO_WARMUP_BELOW step_clip AUTO_STEP_CLIP unless given."""
    options = {"measure_global_error": False, **options}
    if ("step_clip" not in options and isinstance(density, (int, float))
            and density < AUTO_WARMUP_BELOW):
        options["step_clip"] = AUTO_STEP_CLIP
    return options


def _count(totals, stats, dense_bytes):
    """Adds one bucket (or unit) step's stats to the running totals of a State or ReplicaState:
    steps, non_finite_steps, k_total and n_g_total (sparse steps), dense_steps, bytes_total and
    dense_bytes_total."""
    totals.steps += 1
    if stats.get("non_finite"):
        totals.non_finite_steps += 1
    elif stats["mode"] == "sparse":
        totals.k_total += stats["k_total"]
        totals.n_g_total += stats["n_g"]
    else:
        totals.dense_steps += 1
    totals.bytes_total += stats["bytes"]["total"]
    totals.dense_bytes_total += dense_bytes


def _from_group_mean(owner, key, loaded, extra_options):
    """owner's (a State or ReplicaState) new sparsifier for key, started from a group checkpoint's
    (mean residual, threshold, mean velocity): ExDyna from the saved threshold, kept in
    extra_options[key] (owner._make reads it; the other sparsifiers carry none)."""
    mean, threshold, velocity = loaded
    if (owner.sparsifier == "exdyna" and threshold is not None and math.isfinite(threshold)
            and threshold > 0):
        extra_options[key] = {"initial_threshold": float(threshold)}
    sp = owner._make(key)
    sp.set_residual(mean)
    if velocity is not None:
        sp.set_velocity(velocity)
    return sp


def _check_saved_config(state, owner, kind):
    """ValueError when a saved state's sparsifier, density or options differ from owner's (a
    State or ReplicaState, named kind in the message)."""
    for field, mine in (("sparsifier", owner.sparsifier), ("density", owner.target_density),
                        ("options", owner.options)):
        if state.get(field) != mine:
            raise ValueError(f"state_dict {field} {state.get(field)!r} does not match this "
                             f"{kind}'s {mine!r}")


def bucket_key(bucket):
    """(index, length, parameter shapes) of a DDP GradBucket, as text: the same on every rank and
    across restarts of the same model."""
    shapes = ";".join("x".join(str(d) for d in p.shape) for p in bucket.parameters())
    return f"{bucket.index()}:{bucket.buffer().numel()}:{shapes}"


class State:
    """Per-bucket sparsifiers for exdyna.ddp.hook, with PowerSGDState's conventions.

    State(sparsifier="exdyna", density=0.01, process_group=None, *, start_iter=0,
          min_compression_rate=2.0, overlap=True, **options)

    sparsifier, density, process_group, options: exdyna.Sparsifier's arguments, in its order; a
    bad name, density or option raises ValueError here, before training. process_group=None is
    the default group (resolved now, or at the first bucket when the State is made before
    init_process_group, as Lightning's DDPStrategy(ddp_comm_state=...) does; and after
    unpickling). measure_global_error defaults
    to False here (stats' global_error is NaN): pass True for Eq. 1's global error each step, at
    one more all-reduce per bucket step.
    start_iter: the first start_iter iterations (DDP steps) all-reduce every bucket densely,
    exactly as DDP's own all-reduce does (divide by the world size, sum); the sparsifiers start
    afterwards with residuals at zero (PowerSGD's start_powerSGD_iter).
    min_compression_rate: a bucket whose sparse exchange (estimated from its length and the
    density: see sparse_bytes) would not be at least this many times smaller than its dense
    all-reduce is all-reduced densely instead (tiny buckets).
    overlap: step the buckets on a communication thread while backward goes on (see the module's
    doc); False steps them on the autograd thread. Decisions are the same either way.
    warmup_steps: below d = 0.005 it defaults to 100 (AUTO_WARMUP_STEPS): the first 100 steps of
    each bucket run at densities from warmup_start (0.25) down to d, which keeps d = 0.001 from
    diverging; pass warmup_steps=0 for none, or another count (about 10 % of a short run).
    step_clip: below d = 0.005 it defaults to 1.0 (AUTO_STEP_CLIP): each bucket's update is
    scaled to an L2 norm of at most 1, the rest dropped (stale mass); pass step_clip=0 for none.
    optimizer: with momentum_correction=m (DGC's: the buckets accumulate the velocity, masked
    where sent, so the update carries the momentum), the optimizer is checked here: one that
    applies momentum again is refused (ValueError); without it, a warning says what to check.
    The velocity is each bucket's, carried like the residual (rebuilds, state_dict,
    group_state_dict). See docs/python.md, "When the accuracy lags".
    dense_fallback: False by default. True: where a dense iteration is not slower than a sparse
    one (a fast link, a compute-bound model), every bucket is all-reduced densely, as DDP's own
    all-reduce, from early in the run: the State times its first sparse iterations (from
    start_iter + 3 on), and if the dense exchange (predicted from one timed all-reduce of up to
    1 MB) could cost at most one sparse iteration more, runs 6 dense probe iterations, and stays
    sparse for the rest of the run only if a sparse iteration was at least 25 % shorter (a sparse
    step learns less than a dense one); going dense, the residuals are dropped. Sparse
    iterations timed in the density warm-up (warmup_steps) send more than at d: going dense then
    lasts until the warm-up would have ended, and fresh sparsifiers at d are timed against the
    probe for the final decision. All ranks decide alike from the group's mean times;
    fallback (None, or "sparse" or "dense" once decided, with its times) says what was found, a
    warning says when it goes dense, and the state_dict carries the decision.
    log, log_every: log(iteration, scalars) every log_every iterations, with the scalars of the
    iterations since its previous call (exdyna.log: density, bytes, compression, f_t, ...);
    exdyna.log.tensorboard(writer) writes them to TensorBoard. Not pickled with the State.
    non_finite: "skip" here by default (fp16 AMP): a NaN or Inf in any rank's bucket makes every
    rank's update NaN, as DDP's all-reduce would, so GradScaler skips the step on every rank; the
    bucket's residual, velocity, threshold and iteration stay as they were (non_finite_steps
    counts these bucket steps). "raise" refuses the step instead (ValueError naming the element).

    After each step: stats (dict bucket index -> that bucket's last statistics: a sparse bucket's
    are exdyna.Sparsifier.stats plus mode "sparse"; a dense bucket's are mode "dense" (warm-up)
    or "small" (under min_compression_rate), "probe" or "fallback" (dense_fallback), iteration,
    world_size, n_g, k = k_total = n_g,
    density 1, f_t 1 and bytes {"allreduce", "total"}); running totals: iter (DDP iterations
    finished), steps (bucket steps), dense_steps (those all-reduced densely), non_finite_steps
    (those skipped for a NaN or Inf on some rank), k_total and
    n_g_total (values selected and gradients seen by the sparse steps), bytes_total (bytes sent,
    as the C++ communicator counts them: dense steps count their all-reduced bytes) and
    dense_bytes_total (what DDP's all-reduce would have sent for the same steps);
    actual_density() is k_total / n_g_total (target_density is d); compression_stats() is all of
    it as one line. rebuilds counts the buckets
    replaced after DDP rebuilt its buckets.

    Picklable (torch.save(state)): the sparsifiers' states travel as in state_dict(); the
    communication thread and the process group do not, and the loaded State uses the default
    group (as PowerSGDState does). It loads with torch.load's default weights_only=True (torch
    2.6 and later): importing exdyna.ddp registers State as a safe global, whose __setstate__
    accepts only a state_dict() and its configuration.
    """

    def __init__(self, sparsifier="exdyna", density=0.01, process_group=None, *, start_iter=0,
                 min_compression_rate=2.0, overlap=True, optimizer=None, log=None, log_every=100,
                 dense_fallback=False, **options):
        if not isinstance(overlap, bool):
            raise TypeError(f"overlap {overlap!r} is not a bool")
        if not isinstance(dense_fallback, bool):
            raise TypeError(f"dense_fallback {dense_fallback!r} is not a bool")
        self.dense_fallback = dense_fallback
        if log is not None and not callable(log):
            raise TypeError(f"log {log!r} is not callable; expected log(iteration, scalars) "
                            "(exdyna.log.tensorboard(writer) makes one)")
        if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
            raise ValueError(f"log_every {log_every!r} is not valid; expected an integer >= 1")
        self.log, self.log_every = log, log_every
        if isinstance(start_iter, bool) or not isinstance(start_iter, int) or start_iter < 0:
            raise ValueError(f"start_iter {start_iter!r} is not valid; expected an integer >= 0")
        if (isinstance(min_compression_rate, bool)
                or not isinstance(min_compression_rate, (int, float))
                or not min_compression_rate >= 0):
            raise ValueError(f"min_compression_rate {min_compression_rate!r} is not valid; "
                             "expected a number >= 0 (0: every bucket sparse)")
        self.overlap = overlap
        self.start_iter = start_iter
        self.min_compression_rate = float(min_compression_rate)
        self._thread = None  # the communication thread, started on the first overlapped bucket
        self._fallback = None  # dense_fallback's DenseFallback (made by _reset)
        self._estimator = None  # a sparsifier of these options, for sparse_bytes (never stepped)
        self._gathers = {}  # (n_g, world_size) -> its all-gathers' bytes
        self._streams = {}  # device index -> the communication thread's CUDA stream
        # The default group may not exist yet (Lightning's DDPStrategy takes the State before
        # fit() makes the group): then it is looked up at first use, as after unpickling.
        lazy = process_group is None and not (dist.is_available() and dist.is_initialized())
        self._group = None if lazy else _resolve_group(process_group)
        self.sparsifier = sparsifier
        self.target_density = density
        self.options = dict(options)
        if (isinstance(density, (int, float)) and density < AUTO_WARMUP_BELOW
                and "warmup_steps" not in self.options):
            self.options["warmup_steps"] = AUTO_WARMUP_STEPS
        # As DDP's all-reduce: an overflow reaches every rank (fp16 AMP's GradScaler skips it).
        self.options.setdefault("non_finite", "skip")
        # Validate now, not inside backward: building one costs no collective (without a group
        # yet, what does not depend on its size).
        if lazy:
            _check_argument_types(sparsifier, density)
            _exdyna.check_options(sparsifier, float(density), self.options)
        else:
            self._make()
        self._check_momentum_pairing(optimizer)
        self._reset()

    def _check_momentum_pairing(self, optimizer):
        """momentum_correction puts the momentum into the update: an optimizer that applies its
        own would apply it twice (each sent value about 1 / (1 - m) times too far)."""
        m = self.options.get("momentum_correction", 0)
        if not m:
            return
        if optimizer is None:
            warnings.warn(f"exdyna.ddp.State(momentum_correction={m}): the hook's update carries "
                          "the momentum; the optimizer must apply none (SGD momentum=0). Pass "
                          "optimizer= to have it checked", stacklevel=3)
            return
        for i, group in enumerate(optimizer.param_groups):
            if group.get("momentum", 0) or group.get("nesterov", False):
                raise ValueError(
                    f"momentum_correction={m} puts the momentum into the hook's update, and "
                    f"optimizer {type(optimizer).__name__} applies momentum "
                    f"{group.get('momentum')} again (param group {i}); expected an optimizer "
                    "without momentum (torch.optim.SGD(..., momentum=0))")

    def _reset(self):
        self._buckets = {}  # bucket_key -> Sparsifier
        self._loaded = {}   # bucket_key -> state bytes not yet claimed by a bucket
        self._seen = set()  # keys seen in this iteration
        self._layout = {}   # bucket_key -> [(parameter data_ptr, offset, numel)]
        self._group_loaded = {}  # bucket_key -> (mean residual, threshold) from group_state_dict
        self._bucket_options = {}  # bucket_key -> options beyond State's (a carried threshold)
        self._shapes = collections.Counter()  # parameter shapes seen in this iteration
        self.parameter_shapes = None  # ... in the last whole iteration (sorted list)
        self._expected_shapes = None  # a loaded checkpoint's parameter_shapes, until checked
        self.stats = {}
        self.iter = 0
        self.steps = 0
        self.dense_steps = 0
        self.non_finite_steps = 0
        self._interval = exdyna_log.Interval()
        self.k_total = 0
        self.n_g_total = 0
        self.bytes_total = 0
        self.dense_bytes_total = 0
        self.rebuilds = 0
        self._fallback = (DenseFallback(self.options.get("warmup_steps", 0))
                          if self.dense_fallback else None)

    def _drop_sparsifiers(self):
        """dense_fallback's dense iterations: the buckets' sparsifiers are not stepped (their
        residuals dropped)."""
        self._buckets.clear()
        self._layout.clear()

    @property
    def process_group(self):
        """The group the buckets step over (after unpickling: the default group, at first use)."""
        if self._group is None:  # unpickled: the default group, once it exists
            self._group = _resolve_group(None)
        return self._group

    def _make(self, key=None):
        options = {**self.options, **self._bucket_options.get(key, {})} if key else self.options
        if self._fallback is not None and self._fallback.retime is not None:
            options = {**options, "warmup_steps": 0}  # dense through the warm-up: start at d
        options = _hook_options(options, self.target_density)
        return Sparsifier(self.sparsifier, self.target_density, self.process_group, **options)

    def sparse_bytes(self, n_g, world_size):
        """The estimate min_compression_rate compares with the dense all-reduce's bytes: what a
        sparse step's collectives count, for k = max(world_size, floor(d * n_g)) values at
        f(t) = 1: the all-gathers of counts and indices (ExDyna's ladder slot with the exact and
        histogram controllers; under a worker cap, each rank's fused slot of cap indices), the
        summed values (2 bytes with values="fp16", and "bf16" on NCCL; else 4: Gloo sums bf16 as
        float32), and the 8-byte all-reduce with which non_finite="skip" checks the gradients."""
        k = max(world_size, int(self.target_density * n_g))
        values = self.options.get("values")
        nccl = _backend(self.process_group) == "nccl"
        value_bytes = 2 if values == "fp16" or (values == "bf16" and nccl) else 4
        gathers = self._gathers.get((n_g, world_size))
        if gathers is None:  # bucket sizes repeat every iteration: asked once each
            if self._estimator is None:
                self._estimator = self._make()
            gathers = self._gathers[n_g, world_size] = self._estimator._core.gather_bytes(
                n_g, world_size)
        skip = 8 if self.options.get("non_finite") == "skip" else 0
        return gathers + value_bytes * k + skip

    def _dense_mode(self, n_g, world_size, element_size=4):
        """How a bucket of n_g gradients of element_size bytes goes at the current iteration:
        None (sparse), "dense" (the start_iter warm-up), "probe" or "fallback" (dense_fallback's
        dense iterations) or "small" (under min_compression_rate)."""
        if self.iter < self.start_iter:
            return "dense"
        if self._fallback is not None:
            fallback = self._fallback.mode(self.iter)
            if fallback:
                return fallback
        dense = element_size * n_g
        if dense < self.min_compression_rate * self.sparse_bytes(n_g, world_size):
            return "small"
        return None

    def _bucket_sparsifier(self, key, layout=None):
        """The sparsifier of the bucket with this key (see bucket_key), created on first use.
        layout: [(parameter data_ptr, offset, numel)] of the bucket, to carry residuals over when
        DDP re-lays out its buckets."""
        self._seen.add(key)
        sp = self._buckets.get(key)
        if sp is None:
            if key in self._group_loaded:
                sp = _from_group_mean(self, key, self._group_loaded.pop(key),
                                      self._bucket_options)
            else:
                sp = self._make(key)
            if key in self._loaded:
                sp.load_state_dict({"state": self._loaded.pop(key)})
            elif layout is not None:
                self._carry_residual(sp, layout)
            self._buckets[key] = sp
            if layout is not None:
                self._layout[key] = layout
        return sp

    def _submit(self, work):
        """Runs work() on the communication thread, after the work submitted before it."""
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="exdyna-comm")
        return self._thread.submit(work)

    def _comm_stream(self, device):
        """The stream the communication thread steps device's buckets on (made at first use)."""
        stream = self._streams.get(device.index)
        if stream is None:
            # High priority: its short kernels, between waits for the counts, are not queued
            # behind the backward pass's long ones.
            stream = self._streams[device.index] = torch.cuda.Stream(device, priority=-1)
        return stream

    def _drain(self):
        """Waits until the communication thread has finished what was submitted."""
        if self._thread is not None:
            self._thread.submit(lambda: None).result()

    def close(self):
        """Finishes what was submitted and stops the communication thread (a later hook call
        starts a new one). For a process that trains several models in turn."""
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None

    def _carry_residual(self, sp, layout):
        """Sets sp's residual (and, with momentum_correction, its velocity) from the old buckets'
        at the same parameters."""
        self._drain()  # the old buckets' residuals are final only once their steps are done
        where = {}
        for old_key, old_layout in self._layout.items():
            if old_key in self._buckets:
                for ptr, offset, numel in old_layout:
                    where[ptr] = (old_key, offset, numel)
        if not any(ptr in where for ptr, _, _ in layout):
            return
        kinds = ["residual"] + (["velocity"] if self.options.get("momentum_correction", 0) else [])
        for what in kinds:
            values = torch.zeros(sum(n for _, _, n in layout), dtype=torch.float32)
            old_values = {}
            for ptr, offset, numel in layout:
                if ptr not in where:
                    continue
                old_key, old_offset, old_numel = where[ptr]
                if old_numel != numel:
                    continue
                if old_key not in old_values:
                    old_values[old_key] = getattr(self._buckets[old_key], what)()
                old = old_values[old_key]
                if old is not None:
                    values[offset:offset + numel] = old[old_offset:old_offset + numel]
            getattr(sp, "set_" + what)(values)

    def _check_shapes(self, shapes):
        """Refuses (ValueError, before the bucket's collective) a bucket holding a parameter
        shape that the loaded checkpoint's model does not have: a checkpoint of another model."""
        if self._expected_shapes is None:
            return
        missing = collections.Counter(shapes) - self._expected_shapes
        if missing:
            raise ValueError(
                f"the loaded checkpoint is from another model: this model has parameters of shape "
                f"{sorted(missing.elements())} that the checkpoint's model (parameter shapes "
                f"{sorted(self._expected_shapes.elements())}) has not")

    def _end_iteration(self):
        """Drops the sparsifiers of buckets not seen since the last call (DDP rebuilt them) and
        counts the iteration."""
        stale = [k for k in self._buckets if k not in self._seen]
        for k in stale:
            del self._buckets[k]
            self._layout.pop(k, None)
            self._bucket_options.pop(k, None)
        self.rebuilds += len(stale)
        self._seen = set()
        shapes = sorted(self._shapes.elements())
        if self._expected_shapes is not None:
            expected = sorted(self._expected_shapes.elements())
            self._expected_shapes = None
            if shapes != expected:
                raise ValueError(f"the loaded checkpoint is from another model: its parameters "
                                 f"have shapes {expected}, this model's {shapes}")
        self.parameter_shapes = shapes
        self._shapes = collections.Counter()
        self.iter += 1

    @property
    def fallback(self):
        """dense_fallback's finding: None (off, or not decided yet), else {"decision": "sparse"
        or "dense", "since": the iteration it holds from, "summary": the group's mean sparse and
        dense iteration ms and the predicted dense exchange ms}."""
        return self._fallback.saved() if self._fallback else None

    def buckets(self):
        """The keys of the live buckets."""
        return sorted(self._buckets)

    def actual_density(self):
        """k_total / n_g_total: the density the sparse steps sent (target_density is d)."""
        return self.k_total / self.n_g_total if self.n_g_total else 0.0

    def density(self):
        """Deprecated: actual_density() (the name says which density it is)."""
        warnings.warn("exdyna.ddp.State.density() is deprecated: use actual_density() (and "
                      "target_density for d)", DeprecationWarning, stacklevel=2)
        return self.actual_density()

    def _log_iteration(self):
        """After an iteration's last bucket: log's call, every log_every iterations."""
        if self.log is not None and self.iter % self.log_every == 0:
            self.log(self.iter, self._interval.scalars(self))

    def _record(self, index, stats, dense_bytes):
        stats = dict(stats)
        stats.setdefault("mode", "sparse")
        self.stats[index] = stats
        _count(self, stats, dense_bytes)

    def compression_stats(self):
        """One line to log: bytes sent against DDP's dense all-reduce, the actual density against
        d, and the mean f(t) of the buckets' last sparse steps."""
        f_t = [s["f_t"] for s in self.stats.values() if s.get("mode") == "sparse"]
        ratio = self.dense_bytes_total / self.bytes_total if self.bytes_total else 0.0
        return (f"exdyna {self.sparsifier} d={self.target_density:g}: iteration {self.iter}, "
                f"{self.steps} bucket steps ({self.dense_steps} dense"
                + (f", {self.non_finite_steps} non-finite" if self.non_finite_steps else "")
                + "), sent "
                f"{self.bytes_total / 1e6:.3f} MB against {self.dense_bytes_total / 1e6:.3f} MB "
                f"dense ({ratio:.1f}x less), density {self.actual_density():.5f}, f(t) "
                + (f"{sum(f_t) / len(f_t):.3f}" if f_t else "-")
                + (self._fallback.describe() if self._fallback else ""))

    def state_dict(self):
        """This rank's checkpoint: every bucket's state (residual, threshold, partitions,
        iteration, velocity), the totals and the model's parameter shapes; load_state_dict()
        resumes from it bit for bit (see the class's doc for when)."""
        self._drain()  # a bucket still stepping would save its state from before the step
        buckets = dict(self._loaded)
        for k, sp in self._buckets.items():
            buckets[k] = sp.state_dict()["state"]
        return {"format": "exdyna.ddp.State", "sparsifier": self.sparsifier,
                "density": self.target_density, "options": dict(self.options),
                "buckets": buckets, "bucket_options": dict(self._bucket_options),
                "parameter_shapes": self.parameter_shapes,
                "dense_fallback": self._fallback.saved() if self._fallback else None,
                "totals": {"iter": self.iter, "steps": self.steps,
                           "dense_steps": self.dense_steps,
                           "non_finite_steps": self.non_finite_steps, "k_total": self.k_total,
                           "n_g_total": self.n_g_total, "bytes_total": self.bytes_total,
                           "dense_bytes_total": self.dense_bytes_total}}

    def load_state_dict(self, state):
        """Restores every bucket; a bucket's state is applied when DDP first hands the hook that
        bucket (same key). Raises ValueError when state is not a State.state_dict(), or when its
        sparsifier, density or options differ from this State's, here; and at the first bucket
        of a model whose parameter shapes differ from the checkpoint's, before its collective."""
        formats = ("exdyna.ddp.State", "exdyna.ddp.State/group")
        if not isinstance(state, dict) or state.get("format") not in formats:
            raise ValueError(f"state {type(state).__name__} is not an exdyna.ddp.State "
                             "state_dict() or group_state_dict() (expected a dict with format "
                             "'exdyna.ddp.State' or 'exdyna.ddp.State/group')")
        _check_saved_config(state, self, "State")
        self._drain()
        self._reset()
        if state["format"] == "exdyna.ddp.State/group":
            self._group_loaded = {k: (b["mean_residual"], b["threshold"],
                                      b.get("mean_velocity"))
                                  for k, b in state["buckets"].items()}
        else:
            self._loaded = dict(state["buckets"])
            self._bucket_options = dict(state.get("bucket_options", {}))
            saved = state.get("dense_fallback")
            if self._fallback is not None and saved:  # this group's link; else timed again
                self._fallback.restore(saved)
        if state.get("parameter_shapes") is not None:
            self._expected_shapes = collections.Counter(state["parameter_shapes"])
        totals = state.get("totals", {})
        for name in ("iter", "steps", "dense_steps", "non_finite_steps", "k_total", "n_g_total",
                     "bytes_total", "dense_bytes_total"):
            setattr(self, name, totals.get(name, 0))

    def group_state_dict(self):
        """One checkpoint for the whole group, to resume at another world size (torchrun elastic
        restarts). A collective: every rank calls it (after the same step); every rank gets the
        same dict, rank 0 saves it. Per bucket: the mean residual over the ranks (the gradient
        accumulated and not yet applied, which each rank of the resumed group starts from, so its
        mean is kept to float32 rounding) and the last threshold (ExDyna starts from it; other
        sparsifiers, and partitions, start afresh for the new size). load_state_dict() takes it
        at any world size; state_dict() stays the per-rank checkpoint that resumes bit for bit."""
        self._drain()
        group = self.process_group
        world = group.size()
        device = torch.device("cuda") if _backend(group) == "nccl" else None
        live = dict(self._buckets)
        for key, saved in self._loaded.items():  # loaded, not yet stepped: their states
            live[key] = self._make(key)
            live[key].load_state_dict({"state": saved})
        buckets = {}
        for key in sorted(live):  # the same keys, so the same collectives, on every rank
            sp = live[key]
            r = sp.residual()
            if r is None:
                r = torch.zeros(int(key.split(":")[1]), dtype=torch.float32)
            total = r.to(device) if device is not None else r.clone()
            dist.all_reduce(total, group=group)
            stats = sp.stats
            mean_velocity = None
            if self.options.get("momentum_correction", 0):
                v = sp.velocity()
                v = torch.zeros_like(r) if v is None else v
                v = v.to(device) if device is not None else v
                dist.all_reduce(v, group=group)
                mean_velocity = (v / world).cpu()
            buckets[key] = {"mean_velocity": mean_velocity,
                            "mean_residual": (total / world).cpu(),
                            "threshold": stats["threshold"] if stats else
                            self._bucket_options.get(key, {}).get("initial_threshold")}
        return {"format": "exdyna.ddp.State/group", "sparsifier": self.sparsifier,
                "density": self.target_density, "options": dict(self.options),
                "world_size": world, "buckets": buckets,
                "parameter_shapes": self.parameter_shapes,
                "totals": {"iter": self.iter, "steps": self.steps,
                           "dense_steps": self.dense_steps,
                           "non_finite_steps": self.non_finite_steps, "k_total": self.k_total,
                           "n_g_total": self.n_g_total, "bytes_total": self.bytes_total,
                           "dense_bytes_total": self.dense_bytes_total}}

    def __getstate__(self):
        return {"config": {"sparsifier": self.sparsifier, "density": self.target_density,
                           "start_iter": self.start_iter,
                           "min_compression_rate": self.min_compression_rate,
                           "overlap": self.overlap, "log_every": self.log_every,
                           "dense_fallback": self.dense_fallback,
                           "options": dict(self.options)},
                "state_dict": self.state_dict()}

    def __setstate__(self, pickled):
        config = dict(pickled["config"])
        options = config.pop("options")
        # As PowerSGDState: no thread and no group travel; the group is the default one, looked
        # up at first use (torch.load may run before init_process_group).
        for name in ("sparsifier", "start_iter", "min_compression_rate", "overlap"):
            setattr(self, name, config[name])
        self.target_density = config["density"]
        self.options = options
        self.log, self.log_every = None, config.get("log_every", 100)  # a callable stays behind
        self.dense_fallback = config.get("dense_fallback", False)
        self._thread = None
        self._fallback = None
        self._estimator, self._gathers = None, {}
        self._streams = {}
        self._group = None
        self._reset()
        self.load_state_dict(pickled["state_dict"])


# torch >= 2.4: torch.load(weights_only=True), the default from 2.6, builds only registered classes.
if hasattr(torch.serialization, "add_safe_globals"):
    torch.serialization.add_safe_globals([State])


def _layout(bucket):
    out, offset = [], 0
    for p in bucket.parameters():
        out.append((p.data_ptr(), offset, p.numel()))
        offset += p.numel()
    # Dense CPU buckets pack their gradients back to back; anything else carries nothing over.
    return out if offset == bucket.buffer().numel() else None


def _stream_of(state, buf):
    """The context the bucket's step runs in. CUDA, overlapped: the State's stream of the device,
    made to wait for the caller's current stream, which produced buf. CUDA, not overlapped: the
    caller's current stream."""
    if not buf.is_cuda:
        return contextlib.nullcontext()
    caller = torch.cuda.current_stream(buf.device)
    if not state.overlap:
        return torch.cuda.stream(caller)
    mine = state._comm_stream(buf.device)
    mine.wait_stream(caller)
    return torch.cuda.stream(mine)


def _shape_text(p):
    return "x".join(str(d) for d in p.shape)


def hook(state, bucket):
    """The DDP communication hook: model.register_comm_hook(state, exdyna.ddp.hook)."""
    buf = bucket.buffer()
    if buf.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"exdyna.ddp.hook: bucket dtype {buf.dtype} is not supported; expected "
                        "torch.float32, torch.bfloat16 or torch.float16")
    shapes = [_shape_text(p) for p in bucket.parameters()]
    state._check_shapes(shapes)
    state._shapes.update(shapes)
    group = state.process_group
    world = group.size()
    fallback = state._fallback
    if fallback is not None and state.iter >= state.start_iter:
        fallback.on_bucket(state, buf, state.iter)
    mode = state._dense_mode(buf.numel(), world, buf.element_size())
    sp = None if mode else state._bucket_sparsifier(bucket_key(bucket), _layout(bucket))
    if mode == "probe":  # its sparsifier (residual, threshold) waits for the decision
        state._seen.add(bucket_key(bucket))
    elif mode is None and fallback is not None:
        fallback.on_sparse_bucket(state.iter, buf.numel() * buf.element_size())
    index, iteration, last = bucket.index(), state.iter, bucket.is_last()
    if last:
        if fallback is not None and iteration >= state.start_iter:
            fallback.on_last(iteration)
        state._end_iteration()
    # CUDA: set_result records an event on the thread's current stream, and DDP's wait on the
    # future makes its own stream wait for that event (and keeps update's memory until then).
    fut = torch.futures.Future(devices=[buf.device]) if buf.is_cuda else torch.futures.Future()
    stream = _stream_of(state, buf)
    dense_bytes = buf.numel() * buf.element_size()

    def step():
        try:
            with stream:
                if sp is None:
                    # DDP's own all-reduce, bit for bit: divide by the world size, then sum.
                    update = buf.div_(world)
                    torch.distributed.all_reduce(update, group=group)
                    stats = {"mode": mode, "iteration": iteration, "world_size": world,
                             "n_g": buf.numel(), "k_target": buf.numel(),
                             "k_total": buf.numel(), "density": 1.0, "f_t": 1.0,
                             "bytes": {"allreduce": dense_bytes, "total": dense_bytes}}
                else:
                    # In place, as DDP's own hooks: no copy of the bucket, and with
                    # gradient_as_bucket_view=True none of the update into the gradients either.
                    update = sp.step(buf, in_place=True)
                    stats = sp.stats
                state._record(index, stats, dense_bytes)
                if last:
                    state._log_iteration()
                fut.set_result(update)  # inside the stream's context: the event goes on it
        except BaseException as e:  # noqa: B036 - the user sees it when DDP waits on the future
            fut.set_exception(e)

    if state.overlap:
        state._submit(step)
    else:
        step()
    # DDP casts a failed future's value to a tensor ("Unable to cast <message> to Tensor"); a
    # future chained with then() fails in C++, and DDP raises the step's own message.
    return fut.then(_value)


def _value(fut):
    return fut.value()
