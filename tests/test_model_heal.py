"""The model's heal: the bytes a joining node receives (against the formula and a real state dict's tensors) and
their time over one path."""

from __future__ import annotations

import io

import pytest
import torch

from netbench.declarations.config import ReplicatorConfig
from netbench.model.framing import Framing
from netbench.model.heal import (
    HEADER_MESSAGES,
    HTTP_HEADER_BYTES,
    heal_bytes,
    heal_messages,
    heal_payload_bytes,
    heal_time_s,
)
from netbench.shapes import ParamShape
from netbench.workloads import WorkloadConfig, build_workload

SMALL_MLP = WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2, batch_size=64)
FULL = ReplicatorConfig(name="full")
DILOCO = ReplicatorConfig(name="diloco", sync_every=3)


def _shapes(model: torch.nn.Module) -> list[ParamShape]:
    return [ParamShape(name, tuple(p.shape)) for name, p in model.named_parameters()]


def _trained_state(replicator: ReplicatorConfig) -> tuple[dict, list[ParamShape]]:
    """A node's state after one step, as the fault-tolerant worker and torchft's DiLoCo hand it to the transport: the
    weights and AdamW's state, and for DiLoCo the global weights and the outer SGD's Nesterov momentum."""
    workload = build_workload(SMALL_MLP, 0, 1)
    model, params = workload.model, workload.parameters()
    inner = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    workload.compute_step()
    inner.step()
    state: dict = {"model": model.state_dict(), "inner": inner.state_dict()}
    if replicator.name == "diloco":
        original = [p.detach().clone() for p in params]
        outer = torch.optim.SGD(params, lr=0.7, momentum=0.9, nesterov=True)
        for p, o in zip(params, original):
            p.grad = o - p.detach()
        outer.step()
        state["original_parameters"] = original
        state["outer_optim"] = outer.state_dict()
    return state, _shapes(model)


def _tensors(state: object) -> list[torch.Tensor]:
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for v in state.values() for t in _tensors(v)]
    if isinstance(state, (list, tuple)):
        return [t for v in state for t in _tensors(v)]
    return []


@pytest.mark.parametrize(("replicator", "per_param"), [(FULL, 12), (DILOCO, 20)], ids=["full", "diloco"])
def test_heal_bytes_follow_the_formula(replicator: ReplicatorConfig, per_param: int) -> None:
    shapes = [ParamShape("w", (64, 32)), ParamShape("b", (64,)), ParamShape("v", (7, 3, 5))]
    params = sum(s.numel for s in shapes)
    assert heal_bytes(replicator, shapes) == per_param * params + 4 * len(shapes)


def test_plain_sgd_heals_the_weights_alone() -> None:
    shapes = [ParamShape("w", (64, 32)), ParamShape("b", (64,))]
    assert heal_bytes(ReplicatorConfig(name="full", optimizer="sgd"), shapes) == 4 * (64 * 32 + 64)


@pytest.mark.parametrize("replicator", [FULL, DILOCO], ids=["full", "diloco"])
def test_heal_bytes_equal_a_real_state_dicts_tensors(replicator: ReplicatorConfig) -> None:
    from netbench.worker.fault_tolerant import state_tensor_bytes

    state, shapes = _trained_state(replicator)
    assert heal_bytes(replicator, shapes) == state_tensor_bytes(state)
    sizes = sorted(t.numel() * t.element_size() for t in _tensors(state))
    assert sorted(heal_messages(replicator, shapes)) == sizes  # one message per tensor, each its size


def test_a_replicator_that_never_heals_is_refused() -> None:
    with pytest.raises(ValueError, match="never heals"):
        heal_bytes(ReplicatorConfig(name="dct"), [ParamShape("w", (4, 4))])


def test_heal_time_without_delay_is_the_bytes_at_the_payload_rate() -> None:
    shapes = [ParamShape("w", (1024, 1024))]
    rate = 100e6
    payload_Bps = rate / 8 * Framing().efficiency()
    t = heal_time_s(FULL, shapes, rate, 0.0)
    assert t == pytest.approx(heal_bytes(FULL, shapes) / payload_Bps, rel=1e-9)


def test_every_message_of_a_heal_costs_a_round_trip() -> None:
    """On a fast path the bytes take no time: what is left is one round trip per message, the header's included."""
    shapes = [ParamShape("w", (8, 8)), ParamShape("b", (8,))]
    delay = 0.01
    t = heal_time_s(DILOCO, shapes, 1e12, delay)
    messages = HEADER_MESSAGES + len(heal_messages(DILOCO, shapes))
    assert t == pytest.approx(messages * 2 * delay, rel=1e-3)


def test_a_heal_over_a_delay_waits_for_the_window_to_grow() -> None:
    """A fresh connection from its initial window: with a delay a large tensor takes longer than its bytes and one
    round trip per message."""
    shapes = [ParamShape("w", (2048, 2048))]
    rate, delay = 1e9, 0.02
    plain = heal_time_s(FULL, shapes, rate, 0.0)
    slow = heal_time_s(FULL, shapes, rate, delay)
    messages = HEADER_MESSAGES + len(heal_messages(FULL, shapes))
    assert slow > plain + messages * 2 * delay


@pytest.mark.parametrize(("rate", "delay"), [(0.0, 0.01), (1e6, -0.1)])
def test_a_bad_path_is_refused(rate: float, delay: float) -> None:
    with pytest.raises(ValueError, match="rate > 0"):
        heal_time_s(FULL, [ParamShape("w", (4,))], rate, delay)


def test_the_replicators_that_heal_are_those_that_train_through_churn() -> None:
    from netbench.declarations.registry import names, spec
    from netbench.worker.quorum_spec import QUORUM_REPLICATORS

    assert {name for name in names() if spec(name).kept_state is not None} == set(QUORUM_REPLICATORS)


def test_an_http_heal_is_the_torch_save_stream_of_the_published_diloco_state() -> None:
    """torchft's HTTPTransport sends the Manager's state as one torch.save stream. The published DiLoCo example
    registers the outer optimizer twice (its own state and DiLoCo's): the same tensors, written once. The model's
    payload is the stream's bytes and the HTTP headers, within a few per cent on a small model whose framing shows."""
    from torch.distributed._serialization import _streaming_save

    state, shapes = _trained_state(DILOCO)
    manager_state = {
        "user": {
            "default": {"model": state["model"], "inner_optim": state["inner"], "outer_optim": state["outer_optim"]},
            "StreamingDiLoCoFragment_0": {
                "outer_optimizer": state["outer_optim"],
                "original_parameters": dict(enumerate(state["original_parameters"])),
            },
        },
        "torchft": {"step": 3, "batches_committed": 6},
    }
    stream = io.BytesIO()
    _streaming_save(manager_state, stream)
    measured = len(stream.getvalue()) + HTTP_HEADER_BYTES
    model = heal_payload_bytes(DILOCO, shapes, "http")
    assert heal_bytes(DILOCO, shapes) < measured  # every tensor once, and the framing
    assert model == pytest.approx(measured, rel=0.03)
    assert heal_payload_bytes(DILOCO, shapes, "pg") == heal_bytes(DILOCO, shapes)


def test_an_http_heal_pays_its_round_trips_once_not_per_tensor() -> None:
    """One request, one stream: on a fast path what is left is the connect's round trip and the request's and the
    last byte's one-way delays, however many tensors the state holds."""
    shapes = [ParamShape("w", (8, 8)), ParamShape("b", (8,))]
    delay = 0.01
    assert heal_time_s(DILOCO, shapes, 1e12, delay, transport="http") == pytest.approx(4 * delay, rel=1e-3)
    assert heal_time_s(DILOCO, shapes, 1e12, delay, transport="http") < heal_time_s(DILOCO, shapes, 1e12, delay)
