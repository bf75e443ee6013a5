"""exdyna for PyTorch: the C++ gradient sparsifiers (ExDyna and its baselines) with error feedback,
stepping over a torch.distributed process group you already have.

    import exdyna
    sp = exdyna.Sparsifier("exdyna", density=0.01)      # over the default process group
    update = sp.step(flat_grad)                           # averaged sparse update, same on every rank
    sp.stats["density"], sp.stats["bytes"]["total"]

For DistributedDataParallel, see exdyna.ddp (State and hook for register_comm_hook).

Errors: ValueError for a bad density, sparsifier name or option (the message names it), a
non-contiguous gradient, or ranks that disagree on the sparsifier, density, options, gradient
length or dtype (at the first step, on every rank); TypeError for a gradient that is not a
float32, bfloat16 or float16 tensor; TimeoutError when a collective times out, RuntimeError for
other communication failures.
"""

import hashlib
import json

import torch  # noqa: F401  (loads libtorch and registers the ProcessGroup type first)
import torch.distributed as _dist

from . import _exdyna

__all__ = ["Sparsifier", "sparsifier_names", "option_names", "option_table", "stats_fields",
           "cuda_built", "ddp", "log", "__version__"]

#: The library's version (CMakeLists.txt's project(VERSION), as the C++ EXDYNA_VERSION and the
#: package metadata).
__version__ = _exdyna.version()


_STEP_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def cuda_built():
    """Whether this build has the GPU path (CUDA kernels; Sparsifier.step on CUDA tensors)."""
    return bool(_exdyna.cuda_built())


def sparsifier_names():
    """The sparsifiers by name: exdyna, topk, cltk, hard-threshold, sidco, gaussiank, randomk, dgc, dense."""
    return list(_exdyna.sparsifier_names())


def option_names():
    """The keyword options Sparsifier accepts."""
    return list(_exdyna.option_names())


def option_table():
    """The library's options, as a list of dicts (keyword, flag, kind, values, sparsifier it
    tunes, description, default): what docs/sparsifiers.md's table and `exdyna options` show.
    option_names() also lists the Python path's own three: measure_global_error, resident and
    timeout."""
    return [dict(row) for row in _exdyna.option_table()]


def stats_fields():
    """Sparsifier.stats's keys, each with its description and unit (bytes and times: dicts of
    theirs)."""
    return dict(_exdyna._stats_fields())


def _backend(group):
    """The group's backend name ("gloo", "nccl", ...); "" for a group torch.distributed did not
    register (one built by hand), which the fingerprint then treats as taking CPU tensors."""
    try:
        return str(_dist.get_backend(group))
    except (RuntimeError, ValueError):
        return ""


def _check_argument_types(sparsifier, density):
    """The Python types of a sparsifier name and density (the values the library checks)."""
    if not isinstance(sparsifier, str):
        raise TypeError(f"sparsifier name {sparsifier!r} is not a string")
    if isinstance(density, bool) or not isinstance(density, (int, float)):
        raise ValueError(f"density {density!r} is not valid; expected a number in (0, 1]")


def _resolve_group(process_group):
    if process_group is not None:
        return process_group
    if not _dist.is_available() or not _dist.is_initialized():
        raise RuntimeError(
            "torch.distributed is not initialized: call torch.distributed.init_process_group "
            "first, or pass process_group")
    return _dist.distributed_c10d._get_default_group()


class Sparsifier:
    """One error-feedback sparsifier of one flat gradient, over a torch.distributed group.

    Sparsifier(sparsifier="exdyna", density=0.01, process_group=None, **options): the same
    argument names and order as exdyna.ddp.State.

    sparsifier: one of sparsifier_names(). density: d in (0, 1]. process_group: a
    torch.distributed process group (Gloo, or NCCL for CUDA tensors; default: the default group).
    options: the library's option table in Python spelling (the CLI's flags with underscores;
    option_names() lists them, docs/sparsifiers.md describes them), plus measure_global_error (bool),
    resident (bool: on CUDA tensors, the step without host round trips, docs/python.md) and timeout
    (seconds). The convergence options: warmup_steps and warmup_start (the density
    warm-up, on CPU and CUDA tensors), and on CPU tensors momentum_correction (DGC's momentum
    correction with masking: the update then carries the momentum, so the optimizer must apply
    none) and local_clip. non_finite: "raise" (default: a NaN or Inf in the gradient raises
    ValueError naming it) or "skip" (every rank's update is NaN and no state changes: what fp16
    AMP's GradScaler needs; exdyna.ddp.State's default). The defaults are the library's: controller="exact", balance="exact",
    worker_cap="auto"; controller="paper", balance="paper" runs the paper's Algorithms 3 and 5.

    Every rank of the group must call step() in the same order with gradients of the same length
    and dtype. The first step checks that they do: one small all-gather of each rank's
    fingerprint (sparsifier, density, options, length, dtype); where a rank differs, every rank
    raises the same ValueError naming that rank and the field, instead of a collective that would
    mismatch (hang, abort or silently mix gradients of different lengths).
    """

    # The fingerprint's fields in the order they are compared (and named in the error).
    _FIELDS = ("sparsifier", "density", "options", "length", "dtype")
    _FINGERPRINT_BYTES = 1024

    def __init__(self, sparsifier="exdyna", density=0.01, process_group=None, **options):
        _check_argument_types(sparsifier, density)
        self._group = _resolve_group(process_group)
        self._options = dict(options)
        self._core = _exdyna.Sparsifier(sparsifier, float(density), self._group, self._options)
        self._agreed = False  # the ranks' fingerprints are compared at this object's first step

    def step(self, grad, *, in_place=False):
        """This rank's raw gradient (float32, bfloat16 or float16; contiguous, any shape) in; the
        averaged sparse update (a new tensor of the same shape, dtype and device, identical on
        every rank) out. The input is unchanged; the residual stays inside (error feedback), in
        float32 whatever the gradient's dtype: a 16-bit gradient is widened for the step and the
        update rounded back to its dtype. in_place=True writes the update into grad and returns
        grad (no copy of a float32 gradient: what a DDP hook does with its bucket).

        On a CUDA tensor (a build with the GPU path, cuda_built(); an NCCL group, or Gloo)
        everything stays on the GPU, ordered on torch's current stream: exdyna (controller "paper"
        or "exact") and dense run there; the other sparsifiers raise ValueError."""
        if not isinstance(grad, torch.Tensor):
            raise TypeError(f"gradient {type(grad).__name__} is not a torch.Tensor")
        if grad.dtype not in _STEP_DTYPES:
            raise TypeError(f"gradient dtype {grad.dtype} is not supported; expected "
                            "torch.float32, torch.bfloat16 or torch.float16")
        if not grad.is_contiguous():
            # A silent copy would hide that the update does not alias the caller's buffer.
            raise ValueError(f"gradient of shape {tuple(grad.shape)} is not contiguous (strides "
                             f"{tuple(grad.stride())}); expected a contiguous tensor "
                             "(pass grad.contiguous())")
        if grad.is_cuda and not cuda_built():
            # refused before the first step's collective, as the extension would after it
            raise ValueError(f"gradient on {grad.device}: this exdyna build has no GPU path "
                             "(built without CUDA); rebuild where nvcc is found, or step CPU "
                             "tensors")
        if not self._agreed:
            self._check_agreement(grad)
        if not isinstance(in_place, bool):
            raise TypeError(f"in_place {in_place!r} is not a bool")
        wide = grad if grad.dtype == torch.float32 else grad.float()
        # A widened copy is stepped in place too: it is this call's own.
        own = in_place or wide is not grad
        stream = torch.cuda.current_stream(wide.device).cuda_stream if wide.is_cuda else 0
        update = self._core.step(wide, stream, own)
        if grad.dtype == torch.float32:
            return update
        return grad.copy_(update) if in_place else update.to(grad.dtype)

    def fingerprint(self, grad):
        """What every rank must agree on to step together: a dict of the _FIELDS."""
        return {"sparsifier": self._core.name, "density": repr(self._core.density),
                "options": repr(sorted(self._options.items())), "length": str(grad.numel()),
                "dtype": str(grad.dtype)}

    def _check_agreement(self, grad):
        mine = self.fingerprint(grad)
        raw = json.dumps(mine).encode()
        if len(raw) > self._FINGERPRINT_BYTES:  # long options: compared by digest
            mine["options"] = "sha256:" + hashlib.sha256(mine["options"].encode()).hexdigest()
            raw = json.dumps(mine).encode()
        buf = torch.zeros(self._FINGERPRINT_BYTES, dtype=torch.uint8)
        buf[:len(raw)] = torch.tensor(list(raw), dtype=torch.uint8)
        # NCCL moves only CUDA tensors; Gloo both (a CUDA gradient keeps it on its device).
        if grad.is_cuda or _backend(self._group) == "nccl":
            buf = buf.to(grad.device if grad.is_cuda else torch.device("cuda"))
        out = [torch.empty_like(buf) for _ in range(_dist.get_world_size(self._group))]
        _dist.all_gather(out, buf, group=self._group)
        prints = [json.loads(bytes(b.cpu().tolist()).rstrip(b"\0").decode()) for b in out]
        for field in self._FIELDS:
            for rank, other in enumerate(prints):
                if other[field] != prints[0][field]:
                    raise ValueError(
                        f"ranks disagree at the first step: rank {rank} has {field} "
                        f"{other[field]}, rank 0 has {prints[0][field]}; every rank must step the "
                        "same sparsifier, density, options, gradient length and dtype")
        self._agreed = True

    @property
    def stats(self):
        """The last step's statistics as a dict (None before the first step); the same keys, each
        with its description and unit: exdyna._exdyna._stats_fields().

        iteration (the step's number, from 0), world_size, n_g (gradient length), k_target (target
        count floor(d * n_g)), target_density (d), threshold (the selection threshold used; NaN for
        sparsifiers without one), k_per_worker (values each rank selected), k_total (their sum),
        k_unique (distinct indices in the update), density (k_total / n_g), density_error
        (Eq. 6: |k - k_total| / n_g), f_t (Eq. 5: n * max k_i / k_total, 1 when balanced),
        padded_elements (n * max k_i - k_total, the padding of padded all-gathers), collectives
        (collective calls of the step, each one latency-bound round or more), global_error
        (Eq. 1, the mean over ranks of the residual's norm; NaN with measure_global_error=False),
        alloc_per_worker and blocks_per_partition (ExDyna's partitions; empty for others),
        own_partition and own_candidates (the length of the partition this rank selected from,
        the values its exact controller counted), bytes (this rank's bytes per collective:
        allgather_counts, allgather_indices, allreduce, broadcast, alltoall, padded_elements, and
        total, the sum of the five collectives), times (seconds: accumulate, select, allgather,
        allreduce, broadcast, update, other, non_comm, cpu and cpu_comm (0 here: exdyna simulate
        sets them), select_cpu)."""
        return self._core.stats

    def state_dict(self):
        """The iteration, the residual and the sparsifier's state, as bytes in a dict."""
        return {"name": self._core.name, "state": self._core.save_state()}

    def load_state_dict(self, state):
        """Restores a state_dict(); ValueError (naming both) when another sparsifier, density,
        option or gradient length saved it, before any collective."""
        if not isinstance(state, dict) or not isinstance(state.get("state"), bytes):
            raise ValueError(f"state {type(state).__name__} is not a Sparsifier.state_dict() "
                             "(expected a dict with 'state' bytes)")
        self._core.load_state(state["state"])

    def residual(self):
        """A copy of the error-feedback residual (None before the first step)."""
        return self._core.residual()

    def set_residual(self, residual):
        """Replaces the residual (float32, length n_g; builds the sparsifier for that length)."""
        self._core.set_residual(residual)

    def velocity(self):
        """A copy of the momentum correction's velocity (None before the first step, or when
        momentum_correction is 0)."""
        return self._core.velocity()

    def set_velocity(self, velocity):
        """Replaces the velocity (float32, length n_g); ValueError without momentum_correction."""
        self._core.set_velocity(velocity)

    @property
    def name(self):
        """The sparsifier's name (one of sparsifier_names())."""
        return self._core.name

    @property
    def target_density(self):
        """d, the density asked for (stats["density"] is the last step's actual density)."""
        return self._core.density

    @property
    def density(self):
        """d, the target density: the same as target_density, whose name says which."""
        return self._core.density

    @property
    def iteration(self):
        """Steps taken (skipped non-finite steps not counted)."""
        return self._core.iteration

    @property
    def n_g(self):
        """The gradient length (0 before the first step or load)."""
        return self._core.n_g

    def __repr__(self):
        return (f"exdyna.Sparsifier({self._core.name!r}, density={self._core.density}, "
                f"rank={self._core.rank}/{self._core.world_size}, n_g={self._core.n_g})")


# Last: ddp imports Sparsifier from this module, so `exdyna.ddp` works after `import exdyna`.
from . import log  # noqa: E402
from . import ddp  # noqa: E402
