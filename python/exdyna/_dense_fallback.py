"""exdyna.ddp.State(dense_fallback=True): all-reduce densely when a dense iteration is not slower.

On a fast link a sparse iteration can take longer than DDP's dense all-reduce: the link was not
the bottleneck, and the selection competes with the backward pass for the cores. A sparse step also
learns less than a dense one, so there the dense all-reduce reaches any accuracy first.

The State times its first sparse iterations. If a dense iteration could cost at most about two
sparse ones (the dense exchange predicted from one timed all-reduce of up to 1 MB), it probes a
few dense iterations; otherwise (a slow link) it stays sparse and nothing else is spent. After
the probe, sparse stays unless the dense iterations were faster than the sparse ones by less than
MARGIN. Sparse iterations timed during the density warm-up send more than at d, so going dense
then is provisional: dense until the warm-up would have ended (a dense start serves the warm-up's
purpose), then fresh sparsifiers at d without a warm-up are timed, and the final decision compares
them with the probe's dense iterations. Every rank decides the same, at the same iteration, from
the times' means over the group (a sample all-reduce, twice, and at most three all-reduces of two
numbers in a run).
"""

import statistics
import time
import warnings

import torch
import torch.distributed as dist

SKIP = 3    # iterations not timed after the sparse steps start (DDP's rebuild, first allocations)
SPARSE = 5  # sparse iterations timed (the median: an evaluation between two steps is left out)
PROBE = 6   # dense probe iterations; the first one's interval still holds a sparse exchange
# A sparse step moves less of the gradient than a dense one (to the same accuracy the CNN needed
# about 1.1x the steps at d = 0.1, 1.7x at 0.01): sparse is kept only if its iteration is this
# much shorter. The language models' sparse iterations at 1 Gbit/s are 0.6x a dense one's.
MARGIN = 0.25
SAMPLE = 1 << 18  # elements of the timed all-reduce (1 MB of float32): long enough for a link's
                  # bandwidth to show up to 10 Gbit/s, short enough to cost little at 100 Mbit/s


class DenseFallback:
    """The timing and the decisions; the State asks mode(iteration) for every bucket.

    warmup_steps: the State's density warm-up, in iterations (0: the sparse steps run at d)."""

    def __init__(self, warmup_steps=0):
        self.warmup_steps = warmup_steps
        self.origin = None  # the first iteration with sparse steps, in this process
        self.decision = None  # None (timing or probing), "sparse" or "dense", final
        self.since = None  # the iteration from which the decision holds
        self.retime = None  # the iteration fresh sparsifiers at d start (after a provisional dense)
        self.sparse_ms, self.dense_ms = [], []  # iteration intervals
        self.dense_bytes = {}  # iteration -> the dense bytes of its sparse buckets
        self.summary = {}  # the group's means: sparse_ms, predicted_dense_ms, dense_ms
        self._last_end = None  # clock() at the previous iteration's last bucket
        self._begun = None  # the iteration whose first bucket was seen
        self.clock = time.perf_counter

    def _phase(self, iteration):
        return None if self.origin is None else iteration - self.origin

    def _timed_sparse(self, j):
        """Whether iteration j (from the origin) is one whose interval times a sparse step."""
        first = SKIP if self.retime is None else self.retime - self.origin + 1
        return first <= j < first + SPARSE

    def mode(self, iteration):
        """None (sparse), "probe" or "fallback" (dense) for a bucket of this iteration."""
        if self.decision == "dense":
            return "fallback"
        j = self._phase(iteration)
        if self.decision is not None or j is None:
            return None
        if self.retime is not None:
            return "fallback" if iteration < self.retime else None
        return "probe" if SKIP + SPARSE <= j < SKIP + SPARSE + PROBE else None

    def on_bucket(self, state, buf, iteration):
        """Before a bucket's mode is chosen: at an iteration's first bucket, the probe's gate or
        a decision (collectives, on every rank at the same iteration)."""
        if self.decision is not None or iteration == self._begun:
            return
        self._begun = iteration
        if self.origin is None:
            self.origin = iteration
        j = self._phase(iteration)
        if self.retime is not None:
            step = self._decide_at_d if j == self.retime - self.origin + 1 + SPARSE else None
        else:
            step = {SKIP + SPARSE: self._gate, SKIP + SPARSE + PROBE: self._decide}.get(j)
        if step is not None:
            state._drain()  # nothing of the previous iteration is in flight: the collectives next
            step(state, buf, iteration)

    def on_sparse_bucket(self, iteration, dense_bytes):
        """A bucket that goes sparse: what its dense all-reduce would carry."""
        j = self._phase(iteration)
        if self.decision is None and j is not None and self._timed_sparse(j):
            self.dense_bytes[iteration] = self.dense_bytes.get(iteration, 0) + dense_bytes

    def on_last(self, iteration):
        """At an iteration's last bucket: the interval since the previous one's last bucket."""
        now = self.clock()
        j = self._phase(iteration)
        if self.decision is None and j is not None and self._last_end is not None:
            ms = 1e3 * (now - self._last_end)
            if self._timed_sparse(j):
                self.sparse_ms.append(ms)
            elif self.retime is None and SKIP + SPARSE + 1 <= j < SKIP + SPARSE + PROBE:
                self.dense_ms.append(ms)
        self._last_end = now

    @staticmethod
    def measure_exchange(state, buf, elements):
        """Seconds of one all-reduce of `elements` float32 over the group (after one untimed,
        which pays for first use)."""
        sample = torch.zeros(elements, dtype=torch.float32, device=buf.device)
        group = state.process_group
        dist.all_reduce(sample, group=group)
        if buf.is_cuda:
            torch.cuda.synchronize(buf.device)
        t0 = time.perf_counter()
        dist.all_reduce(sample, group=group)
        if buf.is_cuda:
            torch.cuda.synchronize(buf.device)
        return time.perf_counter() - t0

    def _group_mean(self, state, buf, values):
        device = buf.device if buf.is_cuda else torch.device("cpu")
        t = torch.tensor(values, dtype=torch.float64, device=device)
        group = state.process_group
        dist.all_reduce(t, group=group)
        return [v / group.size() for v in t.tolist()]

    def _sparse_median(self):
        return statistics.median(self.sparse_ms) if self.sparse_ms else 0.0

    def _gate(self, state, buf, iteration):
        dense_bytes = max(self.dense_bytes.values()) if self.dense_bytes else 0
        elements = max(1, min(SAMPLE, dense_bytes // 4))
        seconds = self.measure_exchange(state, buf, elements)
        predicted = 1e3 * seconds * dense_bytes / (4 * elements)
        sparse, predicted = self._group_mean(state, buf, [self._sparse_median(), predicted])
        self.summary = {"sparse_ms": sparse, "predicted_dense_ms": predicted}
        if not predicted <= sparse:  # a probe iteration could cost more than two sparse ones
            self._final(state, "sparse", iteration)

    def _sparse_wins(self):
        return self.summary["sparse_ms"] < (1 - MARGIN) * self.summary["dense_ms"]

    def _decide(self, state, buf, iteration):
        dense = statistics.median(self.dense_ms) if self.dense_ms else float("inf")
        (self.summary["dense_ms"],) = self._group_mean(state, buf, [dense])
        if self._sparse_wins():
            self._final(state, "sparse", iteration)
        elif self.warmup_steps <= SKIP:  # the timed sparse iterations ran at d
            self._final(state, "dense", iteration)
        else:  # dense through the warm-up, then sparse at d timed once more
            self.retime = max(iteration, self.origin + self.warmup_steps)
            self.sparse_ms, self.dense_bytes = [], {}
            state._drop_sparsifiers()

    def _decide_at_d(self, state, buf, iteration):
        (self.summary["sparse_ms"],) = self._group_mean(state, buf, [self._sparse_median()])
        self._final(state, "sparse" if self._sparse_wins() else "dense", iteration)

    def _final(self, state, choice, iteration):
        self.decision, self.since = choice, iteration
        if choice == "dense":  # the sparsifiers are not stepped again
            state._drop_sparsifiers()
            if dist.get_rank(state.process_group) == 0:
                warnings.warn(f"exdyna.ddp.State(dense_fallback=True): a dense iteration took "
                              f"{self.summary['dense_ms']:.1f} ms against a sparse one's "
                              f"{self.summary['sparse_ms']:.1f} ms (means over the group): every "
                              f"bucket is all-reduced densely from iteration {iteration}",
                              stacklevel=2)

    def describe(self):
        """For compression_stats(): where the decision stands."""
        if self.decision is None:
            return ""
        times = f"a sparse iteration {self.summary['sparse_ms']:.1f} ms"
        if "dense_ms" in self.summary:
            times += f", a dense one {self.summary['dense_ms']:.1f} ms"
        else:
            times += f", a dense exchange predicted {self.summary['predicted_dense_ms']:.1f} ms"
        return f", {self.decision} since iteration {self.since} ({times})"

    def saved(self):
        """What state_dict() keeps: a final decision (an undecided one is timed again)."""
        if self.decision is None:
            return None
        return {"decision": self.decision, "since": self.since, "retime": self.retime,
                "summary": dict(self.summary)}

    def restore(self, saved):
        if saved:
            self.decision, self.since = saved["decision"], saved["since"]
            self.retime = saved["retime"]
            self.summary = dict(saved["summary"])
