"""exdyna for PyTorch: the C++ gradient sparsifiers (ExDyna and its baselines) with error feedback,
stepping over a torch.distributed process group you already have.

    import exdyna
    sp = exdyna.Sparsifier("exdyna", density=0.01)      # over the default process group
    update = sp.step(flat_grad)                           # averaged sparse update, same on every rank
    sp.stats["density"], sp.stats["bytes"]["total"]

For DistributedDataParallel, see exdyna.ddp (State and hook for register_comm_hook).

Errors: ValueError for a bad density, sparsifier name or option (the message names it), TypeError
for a gradient that is not a float32 tensor (convert fp16/bf16 with .float() first),
TimeoutError when a collective times out, RuntimeError for other communication failures.
"""

import torch  # noqa: F401  (loads libtorch and registers the ProcessGroup type first)
import torch.distributed as _dist

from . import _exdyna

__all__ = ["Sparsifier", "sparsifier_names", "option_names", "cuda_built", "ddp"]


def cuda_built():
    """Whether this build has the GPU path (CUDA kernels; Sparsifier.step on CUDA tensors)."""
    return bool(_exdyna.cuda_built())


def sparsifier_names():
    """The sparsifiers by name: exdyna, topk, cltk, hard-threshold, sidco, gaussiank, randomk, dgc, dense."""
    return list(_exdyna.sparsifier_names())


def option_names():
    """The keyword options Sparsifier accepts."""
    return list(_exdyna.option_names())


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

    Sparsifier(name="exdyna", density=0.01, process_group=None, **options)

    name: one of sparsifier_names(). density: d in (0, 1]. process_group: a torch.distributed
    process group (Gloo; default: the default group). options: the CLI's sparsifier flags in
    Python spelling (see option_names()): gather ("padded" | "exact"), values ("fp32" | "fp16" |
    "bf16"), blocks, min_blk, blk_move,
    alpha, beta, gamma, initial_threshold, controller ("paper" | "histogram" | "exact"), balance
    ("paper" | "exact"), worker_cap ("auto" | "none" | factor), ladder_rungs, ladder_span,
    hard_threshold, sidco_stages, randomk_seed, dgc_sample, oktopk_period, oktopk_repartition,
    measure_global_error (bool), timeout
    (seconds). The defaults are `exdyna train`'s: controller="exact", balance="exact", worker_cap="auto".

    Every rank of the group must call step() in the same order with gradients of the same length.
    """

    def __init__(self, name="exdyna", density=0.01, process_group=None, **options):
        if not isinstance(name, str):
            raise TypeError(f"sparsifier name {name!r} is not a string")
        if isinstance(density, bool) or not isinstance(density, (int, float)):
            raise ValueError(f"density {density!r} is not valid; expected a number in (0, 1]")
        self._core = _exdyna.Sparsifier(name, float(density), _resolve_group(process_group),
                                        dict(options))

    def step(self, grad):
        """This rank's raw gradient (float32, any shape) in; the averaged sparse update (a new
        tensor of the same shape and device, identical on every rank) out. The input is
        unchanged; the residual stays inside (error feedback).

        On a CUDA tensor (a build with the GPU path, cuda_built(); an NCCL group, or Gloo)
        everything stays on the GPU, ordered on torch's current stream: exdyna (controller "paper"
        or "exact") and dense run there; the other sparsifiers raise ValueError."""
        if not isinstance(grad, torch.Tensor):
            raise TypeError(f"gradient {type(grad).__name__} is not a torch.Tensor")
        if grad.is_cuda:
            return self._core.step(grad, torch.cuda.current_stream(grad.device).cuda_stream)
        return self._core.step(grad)

    @property
    def stats(self):
        """The last step's statistics as a dict (None before the first step): iteration, n_g, k,
        density, density_error, k_per_worker, k_total, f_t, threshold, global_error,
        bytes (dict; 'total'), times (dict of seconds), ..."""
        return self._core.stats

    def state_dict(self):
        """The iteration, the residual and the sparsifier's state, as bytes in a dict."""
        return {"name": self._core.name, "state": self._core.save_state()}

    def load_state_dict(self, state):
        self._core.load_state(state["state"])

    def residual(self):
        """A copy of the error-feedback residual (None before the first step)."""
        return self._core.residual()

    def set_residual(self, residual):
        """Replaces the residual (float32, length n_g; builds the sparsifier for that length)."""
        self._core.set_residual(residual)

    @property
    def name(self):
        return self._core.name

    @property
    def density(self):
        return self._core.density

    @property
    def iteration(self):
        return self._core.iteration

    @property
    def n_g(self):
        return self._core.n_g

    def __repr__(self):
        return (f"exdyna.Sparsifier({self._core.name!r}, density={self._core.density}, "
                f"rank={self._core.rank}/{self._core.world_size}, n_g={self._core.n_g})")


# Last: ddp imports Sparsifier from this module, so `exdyna.ddp` works after `import exdyna`.
from . import ddp  # noqa: E402
