"""``--workload python:MODULE:FACTORY``: the user's model and data, trained by netbench's own worker.

``FACTORY()`` returns ``(model, batches)`` or ``(model, batches, loss_fn)``: an ``nn.Module``
with fp32 trainable parameters, an iterable of batches (re-iterated when it runs out), and how a
batch becomes a scalar loss -- ``loss_fn(model, batch)``, or without one ``model(*batch)`` for a
tuple batch and ``model(batch)`` otherwise (the module then returns its own loss). A factory
that takes ``rank`` and/or ``world_size`` keyword arguments gets them.

Every rank calls the factory under one seed, so the replicas start identical; the global RNG is
then reseeded by rank, so batches drawn from it *later* (a generator) differ between ranks, like
the built-in kinds; batches the factory draws up front come from the shared seed (use ``rank``).

Importing MODULE runs the user's code, as root. So it happens only for a workload the user named
for a run they start (:func:`name_for_run`: ``run``, ``worker``, a ``sweep`` that runs, and the
workers those start), never for one read from a folder, a stored run.json or a ``--dry-run``; and
only MODULE's folder (the working directory it was named in) joins ``sys.path``, for that import
alone.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn

from netbench.validation import error_text
from netbench.workloads.base import STREAM_DATA, Workload, build_shared
from netbench.workloads.config import WorkloadConfig

__all__ = ["FactoryError", "name_for_run", "load_factory", "call_factory", "check_factory", "PythonWorkload"]

_NAMED: dict[str, str] = {}  # MODULE:FACTORY -> the folder its module is imported from


class FactoryError(ValueError):
    """The factory cannot be imported, fails, or returns something netbench cannot train."""


def name_for_run(spec: str, folder: str | os.PathLike[str]) -> None:
    """The user named ``python:SPEC`` for a run they start: its module may be imported, from ``folder``."""
    _NAMED[spec] = os.path.abspath(folder)


@contextlib.contextmanager
def _on_path(folder: str) -> Iterator[None]:
    """``folder`` first on ``sys.path`` for the block only."""
    sys.path.insert(0, folder)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def load_factory(spec: str) -> Callable[..., Any]:
    """``MODULE:FACTORY`` (FACTORY may be dotted) imported and looked up; FactoryError says what went wrong.

    Only a spec the user named for a run (:func:`name_for_run`) is imported.
    """
    folder = _NAMED.get(spec)
    if folder is None:
        raise FactoryError(
            "a python: workload is imported only for a run you start (run, worker, sweep without --dry-run); "
            "reading a folder, a stored run or a dry run imports nothing"
        )
    module_name, _, attr = spec.partition(":")
    try:
        with _on_path(folder):
            target: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's module's
        raise FactoryError(f"cannot import {module_name!r}: {error_text(exc)}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise FactoryError(f"{module_name!r} has no {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise FactoryError(f"{spec!r} is not callable")
    return target


def call_factory(
    factory: Callable[..., Any], rank: int, world_size: int
) -> tuple[nn.Module, Iterable[Any], Callable[..., Any] | None]:
    """Call the factory (with rank/world_size if it takes them) and check what it returned."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    kwargs = {k: v for k, v in (("rank", rank), ("world_size", world_size)) if k in params}
    try:
        made = factory(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the user's code failed
        raise FactoryError(f"the factory failed: {error_text(exc)}") from None
    if not isinstance(made, (tuple, list)) or len(made) not in (2, 3):
        raise FactoryError(
            f"the factory must return (model, batches) or (model, batches, loss_fn), got {type(made).__name__}"
        )
    model, batches, loss_fn = (*made, None)[:3]
    if not isinstance(model, nn.Module):
        raise FactoryError(f"the factory's model must be a torch.nn.Module, got {type(model).__name__}")
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable or any(p.dtype != torch.float32 for p in trainable):
        raise FactoryError(
            "the model needs trainable fp32 parameters (replicators send fp32 or bf16 on the wire from fp32 state)"
        )
    if not isinstance(batches, Iterable):
        raise FactoryError(f"the factory's batches must be iterable, got {type(batches).__name__}")
    if loss_fn is not None and not callable(loss_fn):
        raise FactoryError("the factory's loss_fn must be callable (loss_fn(model, batch) -> scalar loss)")
    return model, batches, loss_fn


def check_factory(cfg: WorkloadConfig, world_size: int) -> None:
    """Import and call the factory once, here, so a mistake is one line before any cluster is built."""
    call_factory(load_factory(cfg.factory), 0, world_size)


class PythonWorkload(Workload):
    """The user's model, batches and loss behind the worker's one interface."""

    def __init__(self, cfg: WorkloadConfig, rank: int, world_size: int) -> None:
        factory = load_factory(cfg.factory)
        self.model, self.source, self.loss_fn = build_shared(cfg.seed, lambda: call_factory(factory, rank, world_size))
        torch.manual_seed(
            (cfg.seed * 1_000_003 + STREAM_DATA) * 1_000_033 + rank + 1
        )  # batches from the global RNG differ by rank
        self.batches: Iterator[Any] = iter(self.source)

    def _next_batch(self) -> Any:
        try:
            return next(self.batches)
        except StopIteration:
            self.batches = iter(self.source)  # a finite iterable (a list, a DataLoader) starts over
            try:
                return next(self.batches)
            except StopIteration:
                raise FactoryError(
                    "the factory's batches ran out (give an endless iterator or a re-iterable)"
                ) from None

    def compute_step(self) -> float:
        self.model.zero_grad(set_to_none=False)
        batch = self._next_batch()
        if self.loss_fn is not None:
            loss = self.loss_fn(self.model, batch)
        else:
            loss = self.model(*batch) if isinstance(batch, (tuple, list)) else self.model(batch)
        loss.backward()
        return float(loss.item())
