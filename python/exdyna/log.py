"""The DDP hook's statistics, every N iterations, to any callable or to TensorBoard.

    state = exdyna.ddp.State(density=0.01, log=exdyna.log.tensorboard(writer), log_every=50)
    state = exdyna.ddp.State(density=0.01, log=lambda it, scalars: print(it, scalars))

The State calls log(iteration, scalars) once every log_every DDP iterations, when the
iteration's last bucket has been stepped (on the communication thread when overlap=True, so a
callable that is slow holds the next iteration's buckets). scalars (floats) are over the
iterations since the previous call: density (values sent / gradients, the actual density),
target_density (d), bytes (sent by this rank), dense_bytes (what DDP's all-reduce would have
sent), compression (dense_bytes / bytes), f_t (the mean of the buckets' last f(t)), and
non_finite_steps (bucket steps skipped for a NaN or Inf since the previous call).
"""

__all__ = ["Interval", "tensorboard"]


class Interval:
    """The State's running totals at the previous call: scalars() gives the differences."""

    _TOTALS = ("k_total", "n_g_total", "bytes_total", "dense_bytes_total", "non_finite_steps")

    def __init__(self):
        self._last = dict.fromkeys(self._TOTALS, 0)

    def scalars(self, state):
        """The scalars of the iterations since the previous call (see the module's doc)."""
        now = {name: getattr(state, name) for name in self._TOTALS}
        d = {name: now[name] - self._last[name] for name in self._TOTALS}
        self._last = now
        f_t = [s["f_t"] for s in state.stats.values() if s.get("mode") == "sparse"]
        return {"density": d["k_total"] / d["n_g_total"] if d["n_g_total"] else 0.0,
                "target_density": float(state.target_density),
                "bytes": float(d["bytes_total"]), "dense_bytes": float(d["dense_bytes_total"]),
                "compression": (d["dense_bytes_total"] / d["bytes_total"]
                                if d["bytes_total"] else 0.0),
                "f_t": sum(f_t) / len(f_t) if f_t else 1.0,
                "non_finite_steps": float(d["non_finite_steps"])}


def tensorboard(writer, prefix="exdyna/"):
    """A log callable that writes each scalar to writer (a torch.utils.tensorboard SummaryWriter,
    or anything with add_scalar(tag, value, step)) under prefix + name, at the iteration."""
    if not callable(getattr(writer, "add_scalar", None)):
        raise TypeError(f"writer {type(writer).__name__} has no add_scalar(tag, value, step); "
                        "expected a torch.utils.tensorboard.SummaryWriter")

    def log(iteration, scalars):
        for name, value in scalars.items():
            writer.add_scalar(prefix + name, value, iteration)

    return log
