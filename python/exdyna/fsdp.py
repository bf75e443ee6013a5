"""exdyna on the replicate dimension of hybrid sharding (HSDP) with FSDP2.

    mesh = init_device_mesh("cpu", (R, S), mesh_dim_names=("replicate", "shard"))
    for block in model.blocks:
        fully_shard(block, mesh=mesh["shard"])       # the 1-D shard mesh, not the 2-D one
    fully_shard(model, mesh=mesh["shard"])
    state = exdyna.fsdp.ReplicaState("exdyna", density=0.01)
    exdyna.fsdp.register(model, state, mesh=mesh)    # the replicate group comes from the mesh

FSDP2 shards each unit's parameters over mesh["shard"] and reduce-scatters its gradients there,
densely, as it always does (the fast link). Native HSDP would then all-reduce every shard densely
across the replicas (the slow link); here FSDP2 runs on the 1-D shard mesh, so it does not, and
FSDPModule.set_all_reduce_hook hands each unit's flat reduce-scattered shard to this module
instead: one exdyna.Sparsifier per unit (residual, partitions, threshold: the shard's size, not the
model's) replaces it, in place and before the hook returns, by the averaged sparse update over the
replicate group, identical on every rank of that group. FSDP then divides as it would have (the
shard group's factor), and makes the parameters' gradients from the buffer.

Leave FSDP2's gradient divide factor as it is (the shard group's size): the hook averages over the
replicas itself. Gradient accumulation: set_requires_gradient_sync(False) on the micro-steps (the
hook runs on the synced step only). The replicas must start from the same parameters (FSDP2 does
not broadcast): seed the model's initialisation alike on every rank.

Needs FSDP2 with set_all_reduce_hook: torch 2.7 or later (MIN_TORCH). This module imports under
older torch (Debian's 1.13); register() raises ImportError there, and available() says so first.
"""

import functools
import io

import torch
import torch.distributed as dist

from . import Sparsifier, _STEP_DTYPES, _backend
from . import ddp as _ddp
from . import log as _log

__all__ = ["ReplicaState", "register", "available", "MIN_TORCH"]

#: The first torch with FSDPModule.set_all_reduce_hook (pytorch#147114, 2.7; fully_shard itself
#: is public in torch.distributed.fsdp since 2.6).
MIN_TORCH = "2.7"


def _fsdp2():
    """(fully_shard, FSDPModule), or ImportError naming this torch and the minimum."""
    try:
        from torch.distributed.fsdp import FSDPModule, fully_shard
    except Exception as e:  # noqa: BLE001 - 1.13's fsdp package fails under Python 3.11 with
        # ValueError (a dataclass default), not ImportError: either way FSDP2 is not there
        raise ImportError(_missing()) from e
    if not hasattr(FSDPModule, "set_all_reduce_hook"):
        raise ImportError(_missing())
    return fully_shard, FSDPModule


def _missing():
    return (f"exdyna.fsdp needs FSDP2 (torch.distributed.fsdp.fully_shard and "
            f"FSDPModule.set_all_reduce_hook, torch >= {MIN_TORCH}); this torch is "
            f"{torch.__version__}")


def available():
    """Whether this torch has what exdyna.fsdp needs (FSDP2 with set_all_reduce_hook)."""
    try:
        _fsdp2()
    except ImportError:
        return False
    return True


class ReplicaState:
    """Per-FSDP-unit sparsifiers for the replicate dimension, with exdyna.ddp.State's options.

    ReplicaState(sparsifier="exdyna", density=0.01, replicate_group=None, *, start_iter=0,
                 min_compression_rate=2.0, log=None, log_every=100, **options)

    sparsifier, density, options: exdyna.Sparsifier's, with exdyna.ddp.State's defaults
    (non_finite="skip", measure_global_error=False, the density warm-up and step_clip below
    d = 0.005); a bad value raises ValueError here. replicate_group: the process group of
    this rank's replicas (mesh.get_group("replicate")); None: register(mesh=...) sets it.
    start_iter: each unit's first start_iter reductions are dense (divide by the replicas, sum);
    min_compression_rate: a unit whose sparse exchange would not be that many times smaller than
    its dense all-reduce goes dense (exdyna.ddp.State.sparse_bytes estimates it).
    log, log_every: as exdyna.ddp.State's (exdyna.log.tensorboard(writer) makes one):
    log(iteration, scalars) every log_every iterations, called by the reduction that completes
    the iteration (every unit reduced as often as the most reduced one).

    Each unit's sparsifier is keyed "<module's qualified name>:<flat length>" (the root's name is
    ""), made at the unit's first reduction. After each: stats (key -> the unit's last
    statistics, exdyna.Sparsifier.stats plus mode "sparse", or mode "dense"/"small" with bytes),
    and running totals: iter (reductions of the most reduced unit), steps, dense_steps,
    non_finite_steps, k_total, n_g_total, bytes_total (what this rank sent across the replicas,
    as the communicator counts it), dense_bytes_total (what a dense all-reduce of the same
    buffers would have sent). state_dict() is this rank's (residuals differ on every rank);
    dcp_state_dict() is the shard's, for torch.distributed.checkpoint, and resumes at the same
    replica count bit for bit and at another from the replicas' mean residual.
    """

    def __init__(self, sparsifier="exdyna", density=0.01, replicate_group=None, *, start_iter=0,
                 min_compression_rate=2.0, log=None, log_every=100, **options):
        # exdyna.ddp.State is the one place of the hook defaults and the byte estimate: it
        # validates the arguments now and gives the options (its sparsifiers are never used).
        self._config = _ddp.State(sparsifier, density, replicate_group, overlap=False,
                                  start_iter=start_iter,
                                  min_compression_rate=min_compression_rate, log=log,
                                  log_every=log_every, **options)
        self.log, self.log_every = log, log_every
        self.sparsifier, self.target_density = sparsifier, density
        self.options = dict(self._config.options)
        self.start_iter = start_iter
        self.min_compression_rate = float(min_compression_rate)
        self._group = replicate_group
        self._position = None  # (shard index, shard count) of register()'s mesh
        self._reset()

    def _reset(self):
        self._units = {}   # key -> Sparsifier
        self._loaded = {}  # key -> saved state bytes, until the unit's first reduction
        # key -> (mean residual, threshold, mean velocity) of a checkpoint saved at another
        # replica count, until the unit's first reduction
        self._group_loaded = {}
        self._unit_options = {}  # key -> options beyond the State's (a carried threshold)
        self._calls = {}   # key -> reductions so far (start_iter counts them per unit)
        self._interval = _log.Interval()
        self.stats = {}
        self.iter = self.steps = self.dense_steps = self.non_finite_steps = 0
        self.k_total = self.n_g_total = self.bytes_total = self.dense_bytes_total = 0

    @property
    def replicate_group(self):
        """The process group the units are averaged over (None until set)."""
        return self._group

    def _set_group(self, group):
        """Adopts the mesh's replicate group; refuses one that differs from the State's."""
        if self._group is None:
            self._group = group
            self._config = _ddp.State(self.sparsifier, self.target_density, group,
                                      overlap=False, start_iter=self.start_iter,
                                      min_compression_rate=self.min_compression_rate,
                                      **self.options)
        elif dist.get_process_group_ranks(self._group) != dist.get_process_group_ranks(group):
            raise ValueError(
                f"ReplicaState's replicate_group has ranks "
                f"{dist.get_process_group_ranks(self._group)}, the mesh's 'replicate' dimension "
                f"{dist.get_process_group_ranks(group)}; expected the same group")

    def _make(self, key=None):
        """A sparsifier of the State's options (and the unit's own), with the DDP hook's
        defaults."""
        options = _ddp._hook_options({**self.options, **self._unit_options.get(key, {})},
                                     self.target_density)
        return Sparsifier(self.sparsifier, self.target_density, self._group, **options)

    def _pending(self, key):
        """A new sparsifier for the unit with what was loaded for it: its saved state, or the
        mean residual (and velocity) and threshold of a checkpoint of another replica count."""
        if key in self._group_loaded:
            return _ddp._from_group_mean(self, key, self._group_loaded[key], self._unit_options)
        sp = self._make(key)
        if key in self._loaded:
            sp.load_state_dict({"state": self._loaded[key]})
        return sp

    def _unit(self, key):
        """The unit's sparsifier, made (and given its loaded state) at first use."""
        sp = self._units.get(key)
        if sp is None:
            sp = self._units[key] = self._pending(key)
            self._loaded.pop(key, None)
            self._group_loaded.pop(key, None)
        return sp

    def residual(self, key):
        """A copy of the unit's error-feedback residual (before its first reduction: what a
        loaded checkpoint gave it); None for a unit neither reduced nor loaded. key: units()'."""
        sp = self._units.get(key)
        if sp is None and (key in self._loaded or key in self._group_loaded):
            sp = self._pending(key)
        return None if sp is None else sp.residual()

    def _mode(self, key, flat, world):
        """None (sparse), "dense" (start_iter) or "small" (under min_compression_rate)."""
        if self._calls.get(key, 0) < self.start_iter:
            return "dense"
        dense = flat.numel() * flat.element_size()
        if dense < self.min_compression_rate * self._config.sparse_bytes(flat.numel(), world):
            return "small"
        return None

    def reduce(self, name, flat):
        """The all-reduce hook's body for the unit named name: replaces flat (this rank's
        reduce-scattered shard, 1-D, float32, bfloat16 or float16) in place by its average over
        the replicate group, sparse with error feedback. A collective over that group: every rank
        of it reduces the same units in the same order (FSDP's backward does)."""
        if flat.dtype not in _STEP_DTYPES:
            raise TypeError(f"exdyna.fsdp: unit {name!r} reduces in {flat.dtype}; expected "
                            "torch.float32, torch.bfloat16 or torch.float16 (FSDP2's "
                            "MixedPrecisionPolicy(reduce_dtype=...))")
        if self._group is None:
            raise ValueError("ReplicaState has no replicate_group: pass replicate_group= or "
                             "register(model, state, mesh=mesh)")
        key = f"{name}:{flat.numel()}"
        world = self._group.size()
        mode = self._mode(key, flat, world)
        dense_bytes = flat.numel() * flat.element_size()
        if mode is None:
            sp = self._unit(key)
            sp.step(flat, in_place=True)  # synchronous: FSDP reads flat when the hook returns
            stats = dict(sp.stats, mode="sparse")
        else:
            # What a dense replicate all-reduce does: divide by the replicas, then sum.
            dist.all_reduce(flat.div_(world), group=self._group)
            stats = {"mode": mode, "iteration": self._calls.get(key, 0), "world_size": world,
                     "n_g": flat.numel(), "k_total": flat.numel(), "density": 1.0, "f_t": 1.0,
                     "bytes": {"allreduce": dense_bytes, "total": dense_bytes}}
        self._calls[key] = self._calls.get(key, 0) + 1
        self.iter = max(self.iter, self._calls[key])
        self._record(key, stats, dense_bytes)
        self._log_iteration()

    def _log_iteration(self):
        """log's call, every log_every iterations, once every unit has reduced self.iter times."""
        if (self.log is not None and self.iter % self.log_every == 0
                and all(c == self.iter for c in self._calls.values())):
            self.log(self.iter, self._interval.scalars(self))

    def _record(self, key, stats, dense_bytes):
        self.stats[key] = stats
        _ddp._count(self, stats, dense_bytes)

    def units(self):
        """The keys of the units reduced so far, sorted."""
        return sorted(self._units)

    def actual_density(self):
        """k_total / n_g_total: the density the sparse reductions sent (target_density is d)."""
        return self.k_total / self.n_g_total if self.n_g_total else 0.0

    def compression_stats(self):
        """One line to log: bytes sent across the replicas against a dense all-reduce's."""
        ratio = self.dense_bytes_total / self.bytes_total if self.bytes_total else 0.0
        return (f"exdyna.fsdp {self.sparsifier} d={self.target_density:g}: {self.iter} "
                f"iterations, {self.steps} unit steps ({self.dense_steps} dense), sent "
                f"{self.bytes_total / 1e6:.3f} MB across the replicas against "
                f"{self.dense_bytes_total / 1e6:.3f} MB dense ({ratio:.1f}x less), density "
                f"{self.actual_density():.5f}")

    _TOTALS = ("iter", "steps", "dense_steps", "non_finite_steps", "k_total", "n_g_total",
               "bytes_total", "dense_bytes_total")

    def state_dict(self):
        """This rank's checkpoint: every unit's state (residual, threshold, partitions,
        iteration), the reduction counts and the totals. The residuals differ on every rank, so
        save it under a per-rank key (see load_state_dict)."""
        units = dict(self._loaded)
        for key in self._group_loaded:
            units[key] = self._pending(key).state_dict()["state"]
        for key, sp in self._units.items():
            units[key] = sp.state_dict()["state"]
        return {"format": "exdyna.fsdp.ReplicaState", "sparsifier": self.sparsifier,
                "density": self.target_density, "options": dict(self.options),
                "units": units, "unit_options": dict(self._unit_options),
                "calls": dict(self._calls),
                "totals": {name: getattr(self, name) for name in self._TOTALS}}

    def load_state_dict(self, state):
        """Restores a state_dict() of this rank (each unit's state is applied at its first
        reduction); ValueError for a dict that is not one, or of another sparsifier, density or
        options. For torch.distributed.checkpoint: dcp_state_dict()."""
        if not isinstance(state, dict) or state.get("format") != "exdyna.fsdp.ReplicaState":
            raise ValueError(f"state {type(state).__name__} is not an exdyna.fsdp.ReplicaState "
                             "state_dict() (expected a dict with format "
                             "'exdyna.fsdp.ReplicaState')")
        _ddp._check_saved_config(state, self, "ReplicaState")
        self._reset()
        self._loaded = dict(state["units"])
        # a unit's carried threshold is one of its options, which its saved state must match
        self._unit_options = dict(state.get("unit_options", {}))
        self._restore_counts(state)

    def _restore_counts(self, state):
        self._calls = dict(state.get("calls", {}))
        for name, value in state.get("totals", {}).items():
            if name in self._TOTALS:
                setattr(self, name, value)

    # --- torch.distributed.checkpoint ---------------------------------------------------------

    def _set_position(self, mesh):
        """Keeps this rank's shard index and the shard count of register()'s mesh."""
        names = tuple(mesh.mesh_dim_names or ())
        if "shard" in names:
            self._position = (mesh.get_local_rank("shard"), mesh["shard"].size())

    def _shard_position(self):
        """(shard index, shard count): register()'s mesh's, else (without a 'shard' dimension)
        the lowest global rank of the replicate group and world / replicas, which are the same
        for an (R, S) mesh's row-major layout."""
        if self._group is None:
            raise ValueError("ReplicaState has no replicate_group: pass replicate_group= or "
                             "register(model, state, mesh=mesh) before checkpointing")
        if self._position is not None:
            return self._position
        return (min(dist.get_process_group_ranks(self._group)),
                dist.get_world_size() // self._group.size())

    def _replica_mean(self, tensor):
        total = tensor.to("cuda") if _backend(self._group) == "nccl" else tensor.clone()
        dist.all_reduce(total, group=self._group)
        return (total / self._group.size()).cpu()

    def _replica_means(self, thresholds):
        """Per unit (sorted keys: the same collectives on every replica): the mean residual (and
        velocity) over the replicate group, and the threshold thresholds gives it."""
        units = {}
        for key in sorted(set(self._units) | set(self._loaded) | set(self._group_loaded)):
            sp = self._units[key] if key in self._units else self._pending(key)
            r = sp.residual()
            r = torch.zeros(int(key.rsplit(":", 1)[1]), dtype=torch.float32) if r is None else r
            velocity = None
            if self.options.get("momentum_correction", 0):
                v = sp.velocity()
                velocity = self._replica_mean(torch.zeros_like(r) if v is None else v)
            units[key] = {"mean_residual": self._replica_mean(r), "mean_velocity": velocity,
                          "threshold": thresholds.get(key)}
        return units

    def _thresholds(self):
        """Each unit's last threshold (a loaded one's carried threshold; None when unknown)."""
        out = {key: t for key, (_, t, _) in self._group_loaded.items()}
        for key, sp in self._units.items():
            stats = sp.stats
            out[key] = (stats["threshold"] if stats else
                        self._unit_options.get(key, {}).get("initial_threshold"))
        return out

    def dcp_state_dict(self):
        """This rank's entry for torch.distributed.checkpoint, beside the model's and the
        optimizer's: {"shard<s>": bytes}, s this rank's shard index. A collective over the
        replicate group (every rank calls it after the same step): the bytes hold every
        replica's state_dict() (a resume at the same replica count takes its own: bit for bit)
        and per unit the replicas' mean residual and replica 0's last threshold (a resume at
        another replica count starts every replica from them, as exdyna.ddp.State's
        group_state_dict does). The replicas of a shard hold the same entry, of which DCP keeps
        one copy; bytes, since DCP would flatten a dict into keys that a fresh State's template
        lacks. Pass a fresh State's dcp_state_dict() (on the new mesh) to dcp.load as the
        template, then load_dcp_state_dict() it."""
        shard, shards = self._shard_position()
        states = [None] * self._group.size()
        dist.all_gather_object(states, (self.state_dict(), self._thresholds()), group=self._group)
        entry = {"format": "exdyna.fsdp.ReplicaState/shard", "sparsifier": self.sparsifier,
                 "density": self.target_density, "options": dict(self.options),
                 "shard": shard, "shards": shards, "replicas": len(states),
                 "ranks": [s for s, _ in states], "units": self._replica_means(states[0][1])}
        buf = io.BytesIO()
        torch.save(entry, buf)
        return {f"shard{shard}": buf.getvalue()}

    def load_dcp_state_dict(self, entry):
        """Restores what dcp_state_dict() saved for this rank's shard index: at the same replica
        count this replica's own state (bit for bit); at another, every unit's mean residual
        (and velocity) and threshold, the partitions and the other sparsifiers' state afresh.
        ValueError when the shard's key is missing, or for a checkpoint of another shard count
        (each unit's flat shard differs: FSDP2 reshards parameters, not this state)."""
        shard, shards = self._shard_position()
        saved = self._saved_shard(entry, f"shard{shard}")
        if saved["shards"] != shards:
            raise ValueError(f"the checkpoint was saved at {saved['shards']} shards per replica, "
                             f"this mesh has {shards}; exdyna.fsdp resumes at another replica "
                             "count, not another shard count (each unit's flat shard differs)")
        if saved["replicas"] == self._group.size():
            self.load_state_dict(saved["ranks"][dist.get_rank(self._group)])
            return
        _ddp._check_saved_config(saved, self, "ReplicaState")
        self._reset()
        self._group_loaded = {key: (u["mean_residual"], u["threshold"], u.get("mean_velocity"))
                              for key, u in saved["units"].items()}
        self._restore_counts(saved["ranks"][0])

    @staticmethod
    def _saved_shard(entry, key):
        if not isinstance(entry, dict) or not isinstance(entry.get(key), bytes):
            raise ValueError(f"entry has no bytes under {key!r} (keys "
                             f"{sorted(entry) if isinstance(entry, dict) else type(entry)}); "
                             "expected a dcp_state_dict() saved on a mesh with this shard index")
        saved = torch.load(io.BytesIO(entry[key]), weights_only=True)
        if not isinstance(saved, dict) or saved.get("format") != "exdyna.fsdp.ReplicaState/shard":
            raise ValueError(f"entry {key!r} is not an exdyna.fsdp.ReplicaState "
                             "dcp_state_dict() (format 'exdyna.fsdp.ReplicaState/shard')")
        return saved


def _owned_parameters(module, fsdp_module_type):
    """The parameters module manages itself: its own, less those of FSDP modules inside it."""
    inner = set()
    for child in module.modules():
        if child is not module and isinstance(child, fsdp_module_type):
            inner.update(id(p) for p in child.parameters())
    return [p for p in module.parameters() if id(p) not in inner]


def _check_one_dimensional(name, params):
    """Refuses a unit sharded on a 2-D mesh: native HSDP's dense all-reduce would run first."""
    for p in params:
        mesh = getattr(p, "device_mesh", None)
        if mesh is not None and mesh.ndim != 1:
            raise ValueError(
                f"FSDP unit {name or '<root>'!r} is sharded on a {mesh.ndim}-D mesh "
                f"{mesh.mesh_dim_names}: native HSDP would all-reduce it densely before the hook; "
                "expected fully_shard(..., mesh=mesh['shard']) (the 1-D shard mesh)")


def _replicate_group(mesh):
    names = tuple(getattr(mesh, "mesh_dim_names", None) or ())
    if "replicate" not in names:
        raise ValueError(f"mesh has dimensions {names or '(unnamed)'}; expected a DeviceMesh with "
                         "a 'replicate' dimension (init_device_mesh(..., mesh_dim_names="
                         "('replicate', 'shard')))")
    return mesh.get_group("replicate")


def register(model, state, mesh=None):
    """Installs state's all-reduce hook on every FSDPModule of model that owns parameters
    (set_all_reduce_hook is per module); returns their qualified names (the root's is "").

    mesh: the 2-D DeviceMesh with a 'replicate' dimension, whose group state adopts (or must
    equal). Raises ImportError without FSDP2 (torch < MIN_TORCH), TypeError for a state that is
    not a ReplicaState, ValueError for a model without FSDP modules, a unit on a 2-D mesh, a mesh
    without 'replicate', or no replicate group at all."""
    _, fsdp_module = _fsdp2()
    if not isinstance(state, ReplicaState):
        raise TypeError(f"state {type(state).__name__} is not an exdyna.fsdp.ReplicaState")
    if mesh is not None:
        state._set_group(_replicate_group(mesh))
        state._set_position(mesh)
    if state.replicate_group is None:
        raise ValueError("no replicate group: pass ReplicaState(replicate_group=...) or "
                         "register(model, state, mesh=mesh)")
    units = []
    for name, module in model.named_modules():
        if isinstance(module, fsdp_module):
            params = _owned_parameters(module, fsdp_module)
            if params:
                _check_one_dimensional(name, params)
                units.append((name, module))
    if not units:
        raise ValueError(f"model {type(model).__name__} has no FSDPModule owning parameters; "
                         "expected torch.distributed.fsdp.fully_shard(block, mesh=mesh['shard']) "
                         "on its blocks and on the model before register()")
    for name, module in units:
        module.set_all_reduce_hook(functools.partial(state.reduce, name))
    return [name for name, _ in units]
