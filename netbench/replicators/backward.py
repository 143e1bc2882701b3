"""Start a pipelined replicator's buckets during backward, as DDP does, from post-accumulate-grad hooks.

A bucket is launched (encoded, its async collective started) as soon as every parameter it reads
has its final gradient, so its communication travels while backward still computes the earlier
layers. Buckets are launched strictly in their index order, identical on every rank, so the
collectives match up whatever order the hooks fire in; a bucket whose turn comes while it is not
ready yet holds back the ones after it. Replicators cut their buckets in reverse parameter order
(the order backward produces gradients) so bucket 0 is ready first.

Whatever backward did not launch (no backward at all, an unused parameter, hooks detached),
:meth:`BackwardOverlap.finish` launches inside the replicator's step with the same bucket pipeline,
so the result is the same bit for bit with or without hooks: every bucket's encode, collective
and decode are the same operations on the same tensors, only earlier.

Only for workloads that run exactly one backward per step (the built-in transformer and MLP):
with gradient accumulation over micro-batches the hooks would fire on the first micro-batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from netbench.replicators.base import Hooked, StepTimer
from netbench.replicators.comm import Pending

__all__ = ["BackwardOverlap"]


class BackwardOverlap:
    """Hooks on ``params`` that launch buckets as their gradients become final, and the step's finish."""

    def __init__(
        self,
        params: Sequence[torch.nn.Parameter],
        needs: Sequence[Sequence[int]],
        encode: Callable[[int], None],
        start: Callable[[int], Pending],
        decode: Callable[[int], None],
    ) -> None:
        """``needs[b]``: indices (into ``params``) of the parameters bucket ``b`` reads."""
        self.buckets = len(needs)
        self._needs = [sorted(set(n)) for n in needs]
        self._users: list[list[int]] = [[] for _ in params]
        for b, ids in enumerate(self._needs):
            for i in ids:
                self._users[i].append(b)
        self._encode, self._start, self._decode = encode, start, decode
        self._handles = [p.register_post_accumulate_grad_hook(self._hook(i)) for i, p in enumerate(params)]
        self.last_hooked_s = 0.0  # codec seconds (paced) the last finished step spent inside backward
        self._reset()

    def _reset(self) -> None:
        self._missing = [len(n) for n in self._needs]
        self._seen: set[int] = set()
        self._launched = 0  # buckets 0 .. _launched - 1 are encoded and on the wire (or decoded)
        self._pending: dict[int, Pending] = {}
        self.hooked = Hooked()  # codec time spent inside backward this step

    def _hook(self, index: int) -> Callable[[torch.Tensor], None]:
        def ready(_param: torch.Tensor) -> None:
            if index in self._seen:  # its bucket may already be on the wire without this gradient
                raise RuntimeError(
                    "overlap_backward needs exactly one backward per step; a second backward "
                    "(gradient accumulation) found its gradients already sent: run with it off"
                )
            self._seen.add(index)
            for b in self._users[index]:
                self._missing[b] -= 1
            with torch.no_grad():
                self._launch_ready()
                self._decode_arrived()

        return ready

    def _launch_ready(self) -> None:
        """Encode and start every bucket whose turn it is and whose gradients are all final."""
        while self._launched < self.buckets and self._missing[self._launched] == 0:
            began, began_cpu = time.perf_counter(), time.thread_time()
            self._encode(self._launched)
            self.hooked.encode_s += time.perf_counter() - began
            self.hooked.encode_cpu_s += time.thread_time() - began_cpu
            self._pending[self._launched] = self._start(self._launched)
            self._launched += 1

    def _decode_arrived(self) -> None:
        """Decode (without blocking) every launched bucket whose collective has completed."""
        for b in sorted(self._pending):
            if not self._pending[b].done():
                continue
            began, began_cpu = time.perf_counter(), time.thread_time()
            self._pending.pop(b).wait()
            self._decode(b)
            self.hooked.decode_s += time.perf_counter() - began
            self.hooked.decode_cpu_s += time.thread_time() - began_cpu

    def finish(self, timer: StepTimer) -> Hooked:
        """Inside the step: encode and start what backward did not launch, then wait for and decode
        every bucket still pending, in order (most were launched during backward already).

        Returns the codec time spent in backward's hooks this step, and resets for the next step."""
        for b in range(self._launched, self.buckets):
            self._encode(b)
            timer.compress()
            self._pending[b] = self._start(b)
            timer.skip()
        for b in sorted(self._pending):
            self._pending.pop(b).wait()
            timer.skip()
            self._decode(b)
            timer.decode()
        hooked = self.hooked
        self.last_hooked_s = sum(hooked.paced())
        self._reset()
        return hooked

    def remove(self) -> None:
        """Detach the hooks (the replicator then runs its plain pipeline)."""
        for h in self._handles:
            h.remove()
        self._handles = []
