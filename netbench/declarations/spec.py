"""What a replicator is, declared once and without torch: its name, collective, payload formula and settings.

Every part of netbench that needs to know about a replicator reads its :class:`ReplicatorSpec`: the run
configuration validates names against the registry, the command line lists each replicator beside the
options it takes, calibration keys its cost by its cost settings, figures draw it in its colour, and the
analytic model takes its bytes and its special cases (a period, no codec, hooks in backward) from it. The
class that does the work with torch is named by ``codec`` (``module:Class``) and imported only to train.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from netbench.declarations.shared_settings import ReplicatorSettings
    from netbench.shapes import ParamShape

__all__ = [
    "Collective",
    "KeptState",
    "PayloadDecl",
    "ReplicatorSpec",
    "PayloadFormula",
    "Settings",
    "SettingError",
    "TestPreset",
]

Collective = Literal["all_reduce", "all_gather", "all_to_all", "pairwise", "none"]


class SettingError(ValueError):
    """A setting the model's shapes rule out (fragments that do not divide its layers): ``field`` names it, so the
    command line can name its option."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field


@dataclass(frozen=True)
class PayloadDecl:
    """What one node hands to collectives, derived from shapes and settings alone.

    The analytic model and the workers both read this, so predicted and measured bytes come
    from the same formula (and a test checks the formula against the real tensors). A replicator
    that makes several exchanges of different sizes or periods (two dependent rounds, several
    states on their own periods) lists the others in ``also``; :meth:`parts` gives them all.

    An exchange made on a step of its period other than the last (Streaming DiLoCo's fragments, staggered over
    the H inner steps) names that step with ``offset``; one whose collective overlaps the next inner steps
    (a fragment's outer gradients travelling while training goes on) names how many with ``overlap_steps``: the
    rank waits for it only ``overlap_steps`` steps after starting it. One that carries some of the model's layers
    only (a fragment) names them with ``layers``, numbered as :func:`~netbench.declarations.fragments.layer_of_each`
    numbers them out of ``layer_count``: a layer schedule sends each as backward produces it. One made in a phase of
    the run only (1-bit Adam's dense warm-up, then its compressed steps) names the phase's 1-based first and last
    steps with ``steps`` (last 0: to the end of the run); the model prices the phase that never ends. One made on every
    step of such a phase but those its ``period`` and ``offset`` name (0/1 Adam's compressed gradients, on the steps
    between its variance updates) says so with ``others``.
    """

    collective: Collective
    # on a communicating step: all_gather -> own contribution, all_reduce and all_to_all -> buffer size,
    # pairwise -> what the node sends its partner
    bytes_per_step: int
    period: int = 1  # communicates every `period` steps
    collectives_per_step: int = 1
    label: str = ""  # names the exchange when a replicator makes several
    also: tuple[PayloadDecl, ...] = ()
    offset: int = 0  # communicates on 1-based steps s with s % period == offset % period
    overlap_steps: int = 0  # local steps its collective overlaps before the rank waits for it
    layers: tuple[int, ...] = ()  # the model's layers it carries (empty: all of them)
    layer_count: int = 0  # the model's layers, in the numbering ``layers`` uses
    hop_codec: bool = False  # a ring whose every hop decodes, adds and encodes (the quantized ring): codec on its path
    steps: tuple[int, int] = (1, 0)  # the phase it is made in: 1-based first and last step (last 0: no end)
    others: bool = False  # made on the phase's steps that period and offset do not name (a phase that ends only)

    def __post_init__(self) -> None:
        first, last = self.steps
        if first < 1 or not (last == 0 or last >= first):
            raise ValueError(
                f"exchange {self.label or self.collective}: steps must be (first >= 1, 0 or last >= first)"
            )
        if self.period < 1 or self.offset < 0 or self.overlap_steps < 0 or self.overlap_steps >= self.period:
            raise ValueError(
                f"exchange {self.label or self.collective}: period >= 1, offset >= 0 and "
                f"0 <= overlap_steps < period required"
            )
        if self.others and last == 0:
            raise ValueError(f"exchange {self.label or self.collective}: others needs a phase that ends")
        if self.layers and not all(0 <= layer < self.layer_count for layer in self.layers):
            raise ValueError(f"exchange {self.label or self.collective}: layers must lie in 0..layer_count - 1")

    def on(self, step: int) -> bool:
        """Whether this exchange (this part alone) starts its collectives on 1-based ``step``."""
        first, last = self.steps
        in_phase = first <= step and (last == 0 or step <= last)
        return in_phase and (step % self.period == self.offset % self.period) != self.others

    def times_made(self) -> int:
        """How many steps of its phase it is made on (a phase that ends; 0 for one that lasts)."""
        first, last = self.steps
        if last == 0:
            return 0
        at = self.offset % self.period
        hits = (last - at) // self.period - (first - 1 - at) // self.period
        return last - first + 1 - hits if self.others else hits

    def parts(self) -> tuple[PayloadDecl, ...]:
        """Every exchange declared: this one, then those in ``also``."""
        return (replace(self, also=()), *(q for p in self.also for q in p.parts()))

    def dense_steps(self) -> int:
        """How many steps open the run in phases that end (1-bit Adam's dense warm-up: its ``freeze_step``): the
        steps before the lasting phase the model prices per step; 0 where every part lasts the whole run."""
        return max((p.steps[1] for p in self.parts()), default=0)

    def bytes_on(self, step: int) -> int:
        """Bytes handed to collectives on 1-based ``step`` (every part whose period divides it)."""
        return sum(p.bytes_per_step for p in self.parts() if p.on(step))

    def collectives_on(self, step: int) -> int:
        """Collective calls made on 1-based ``step``."""
        return sum(p.collectives_per_step for p in self.parts() if p.on(step))


class Settings(Protocol):
    """A :class:`~netbench.declarations.config.ReplicatorConfig` as the declarations read it. Named by its shape,
    not its class: the config validates names against the declarations, so they cannot import it back."""

    name: str

    def __getattr__(self, field: str) -> Any: ...


STATE_ITEM_BYTES = 4  # every kept state tensor is fp32, as the weights are


@dataclass(frozen=True)
class KeptState:
    """The state a replicator keeps from one step to the next besides the weights, per parameter tensor: ``copies``
    fp32 tensors of its shape (optimizer moments, global weights, an outer momentum) and ``scalars`` fp32 scalars
    (AdamW's step count). What a node that joins receives from a live peer (a heal); scratch rebuilt every step (a
    pseudo-gradient, a wire buffer) is not kept state."""

    copies: int = 0
    scalars: int = 0

    def __add__(self, other: KeptState) -> KeptState:
        return KeptState(self.copies + other.copies, self.scalars + other.scalars)

    @property
    def bytes_per_param(self) -> int:
        """Bytes per parameter of the copies (the scalars are per tensor)."""
        return STATE_ITEM_BYTES * self.copies


PayloadFormula = Callable[["Sequence[ParamShape]", Settings, int], PayloadDecl]


def _every_step(config: Settings) -> int:
    return 1


@dataclass(frozen=True)
class TestPreset:
    """The settings the test suite checks and trains a replicator with, so every test takes every declared
    replicator from the registry and none keeps a table of its own.

    ``check``: settings for a few steps on tiny tensors (16-wide and smaller, some 1-D, a scalar) on 2 ranks, and on
    4 ranks that shard a small MLP in halves: tiles that fit the halves, and a period that divides 4 steps.
    ``variants``: more settings checked on 2 ranks, each on top of ``check`` and named for what it adds (``bf16``,
    ``int4``). ``train``: settings under which 60 steps of a small MLP on 2 ranks at least halve its loss.
    """

    __test__ = False  # a declaration's data, not a test class for pytest to collect

    check: Mapping[str, Any] = field(default_factory=dict)
    train: Mapping[str, Any] = field(default_factory=dict)
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplicatorSpec:
    """One replicator, as everything but its torch implementation sees it.

    ``settings`` is its settings class (:mod:`netbench.declarations.shared_settings`): the fields it reads, each
    with its range and help, declared beside the declaration or, where several replicators read it, once in a
    shared class it inherits; :class:`~netbench.declarations.config.ReplicatorConfig` composes every declaration's
    class. ``options`` are that class's fields (the command line's help names the replicators that take each).
    ``cost_settings`` are those of them that change its encode/decode work per parameter, so a calibration keyed
    by them never prices one setting with another's cost.
    """

    name: str
    summary: str  # one line for listings: what it sends
    collective: str  # how figures name its exchange: "all-reduce", "all-gather", "periodic all-reduce"...
    payload: PayloadFormula  # bytes per communicating step, from shapes and settings alone
    codec: str  # "module:Class" of the torch implementation, imported on first use
    order: int = 100  # place in listings and in `all` (the dense baseline first)
    settings: type[ReplicatorSettings] | None = None  # None: it reads no setting of its own
    test_preset: TestPreset = field(default_factory=TestPreset)  # what the tests check and train it with
    cost_settings: tuple[str, ...] = ()
    # Settings the calibration times its codec with, besides its cost settings: ones that change none of the codec's
    # work but would make every timed step slow (an inner optimizer the codec does not include)
    calibrated_with: Mapping[str, Any] = field(default_factory=dict)
    color: str = ""  # its colour in every figure; empty: the first palette colour nobody claims
    period: Callable[[Settings], int] = _every_step  # steps between its synchronisations (timing windows)
    # False: it sends dense state as it is, so there is no encode/decode cost to calibrate; a function of the
    # settings where some of them add a codec (quantizing a dense exchange)
    encodes: bool | Callable[[Settings], bool] = True
    pipelined_by_default: bool = False  # `--bucket-mb auto` cuts its step into pipelined buckets
    backward_hooks: bool = False  # starts its buckets from backward's hooks (with `overlap_backward`)
    overlaps_compute: bool = False  # its communication overlaps the backward pass as a whole
    compression: Callable[[float, Settings], dict[str, Any]] | None = None  # `--compression` -> settings
    in_default_sweep: bool = False  # a sweep scenario that names no replicator runs it
    compression_knob: str = ""  # what `--compression` sets for it, for the option's help ("rate")
    # Device-memory bytes one synchronisation's encode + decode moves per parameter (a periodic replicator's steps
    # share it: the planner divides by its period): what the planner divides by an accelerator's memory bandwidth
    # where no measured codec profile exists. Read off the H100 profile in reports/gpu where it measures the
    # replicator (its cost per parameter x 3.35 TB/s, rounded), else counted from the operations (an estimate of an
    # estimate: each such spec says so).
    codec_bytes_per_param: float = 0.0
    # Device-memory bytes per parameter it keeps besides the weights and their gradients: its inner optimizer's
    # state and its own buffers, counted from its implementation (the buffers its collectives need follow from its
    # payload); a function of the settings where they change it. What the planner's memory check adds up.
    state_bytes_per_param: float | Callable[[Settings], float] = 0.0
    # The state it keeps from step to step besides the weights (:class:`KeptState`),
    # from the settings: what a node that joins receives from a live peer (a heal), and the part of
    # ``state_bytes_per_param`` that is not scratch. None: it trains with every node throughout and never heals.
    kept_state: Callable[[Settings], KeptState] | None = None
    # A pairwise exchange's pairs of ranks at the sync that ends a 1-based step, from (settings, ranks, step): what
    # the model prices on a topology (None: its exchanges are collectives of every rank).
    pairing: Callable[[Settings, int, int], list[tuple[int, int]]] | None = None

    @property
    def options(self) -> tuple[str, ...]:
        """The settings it reads: its settings class's fields, its own first, then each base's in the order it lists
        them."""
        if self.settings is None:
            return ()
        fields = self.settings.model_fields
        declared = (name for klass in self.settings.__mro__ for name in vars(klass).get("__annotations__", {}))
        return tuple(dict.fromkeys(name for name in declared if name in fields))

    def encodes_with(self, config: Settings) -> bool:
        """Whether ``config`` gives this replicator encode/decode work to calibrate."""
        return self.encodes(config) if callable(self.encodes) else self.encodes

    def state_bytes_with(self, config: Settings) -> float:
        """Bytes per parameter of optimizer and replicator state ``config`` keeps on the device."""
        state = self.state_bytes_per_param
        return state(config) if callable(state) else state

    def load(self) -> type:
        """The torch implementation (imports torch)."""
        module, _, attr = self.codec.partition(":")
        return getattr(importlib.import_module(module), attr)
