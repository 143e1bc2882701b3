"""This host's model constants: measured by ``netbench calibrate`` or on first use, cached per host.

Defaults when nothing was measured are the ideal-link model -- zero software overhead, zero
compression cost -- marked ``source: "defaults"`` so every report can say it is uncalibrated
rather than silently use some other machine's numbers. ``run``, ``sweep`` and ``plan`` never
use the defaults on their own: they measure this host first (:mod:`netbench.calibrate.hostcache`).

Encode and decode are separate constants, each ``a * params + b * tensors``: the replicators
walk tensors one by one, so a model of many small tensors pays a fixed cost per tensor that a
per-parameter constant measured on large matrices leaves out (a 0.5 M-parameter transformer of
29 tensors costs twice what gpt2-small's per-parameter figure says).

The cost per parameter also depends on the model's size: a codec's buffers (gradient, momentum,
scratch: about 20 bytes per parameter for a transform codec) fit the last-level cache for small models and stream
from memory for large ones (this host: 32 MiB L3; a transform codec's decode measured 4.0 ns/param on 2.2 M
parameters, 6.4 on 14.2 M). A calibration may hold a second per-parameter cost measured on a
large model (``*_s_per_param_large`` at ``large_params``, the first at ``params_at``); between the
two sizes the cost is interpolated in log(params), beyond them it is the nearer one's (past the
cache, memory bandwidth bounds the cost per parameter).

Encode/decode costs are keyed by what changes them (:func:`cost_key`): a replicator's name for its
default settings (``NAME``), the name and its non-default cost settings otherwise
(``NAME[chunk=32,topk=8]``), so a run with ``--topk 8`` is never predicted with the default's cost.
A key that was not measured falls back to the replicator's default-settings cost
(:meth:`Calibration.resolve` says which one a prediction used).

Location of an explicit file: ``--calibration``/``path`` argument, else ``$NETBENCH_CALIBRATION``;
otherwise this host's cache entry (:func:`netbench.calibrate.hostcache.cache_path`).
"""

from __future__ import annotations

import hashlib
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from netbench import safe_files, untrusted
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import REGISTRY
from netbench.model.framing import DEFAULT_KERNEL_HZ, DEFAULT_WAKEUP_SEGMENTS, Framing, wakeup_segments
from netbench.settings import Override, Setting
from netbench.validation import ShownText, one_line

if TYPE_CHECKING:
    from netbench.declarations.config import ReplicatorConfig

__all__ = [
    "Calibration",
    "CalibrationError",
    "cost_settings",
    "cost_key",
    "default_path",
    "read_calibration",
    "save_calibration",
    "ENV_VAR",
]

# Which calibration a command predicts with.
CALIBRATION = Setting(
    "--calibration",
    "calibration",
    "path",
    "Model constants to predict with [default: this host's, measured once and cached].",
    overrides={
        "sweep": Override("a sweep's calibration predicts every point", help="Calibration JSON for the predictions."),
        "report": Override(
            "report re-predicts stored points, it measures nothing",
            help="Re-predict every point with this calibration first.",
        ),
        "plan": Override(
            "plan also reads $NETBENCH_CALIBRATION",
            help="calibration JSON [default $NETBENCH_CALIBRATION, else this host's cached one, measured on first use]",
        ),
    },
)

ENV_VAR = "NETBENCH_CALIBRATION"
# 2: encode and decode costs apart; 3: by model size (*_s_per_param_large) and by settings (cost keys); 4: median step,
# not fastest
SCHEMA_VERSION = 4
OLDEST_READ_VERSION = 2  # a version-1 file holds only encode + decode together, which the step model cannot place


def cost_settings(name: str) -> tuple[str, ...]:
    """The settings that change replicator ``name``'s encode/decode work per parameter, as its declaration
    lists them (tile sides, kept fractions, wire dtypes, a period its per-step average divides by). Learning
    rates, seeds and momentum decays change no work. A name nobody declared has none."""

    declared = REGISTRY.get(name)
    return declared.cost_settings if declared is not None else ()


@lru_cache(maxsize=1024)
def cost_key(config: ReplicatorConfig) -> str:
    """The calibration key of ``config``'s encode/decode cost: its name, plus the cost settings that differ from the
    defaults (kept per config: a plan's searches price the same scheme at hundreds of points).
    """

    default = ReplicatorConfig(name=config.name)
    changed = [
        f"{field}={getattr(config, field)}"
        for field in sorted(cost_settings(config.name))
        if getattr(config, field) != getattr(default, field)
    ]
    return f"{config.name}[{','.join(changed)}]" if changed else config.name


def scheme_of(key: str) -> str:
    """The replicator name of a cost key (``NAME[topk=8]`` -> ``NAME``)."""
    return key.split("[", 1)[0]


class CalibrationError(ValueError):
    """A calibration file exists but cannot be used."""


class Calibration(BaseModel):
    """Measured constants of the analytic model; each has a neutral default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(
        SCHEMA_VERSION,
        ge=OLDEST_READ_VERSION,
        le=SCHEMA_VERSION,
        description="the file format; netbench reads the versions from OLDEST_READ_VERSION to its own",
    )
    source: Literal["defaults", "measured"] = "defaults"
    created: ShownText = Field("", description="ISO timestamp of the measurement")
    host: ShownText = ""
    torch_version: ShownText = ""
    host_key: dict[str, ShownText] = Field(
        default_factory=dict, description="what the measurement depends on (hostname, CPU, versions, threads)"
    )
    software_overhead_s: float = Field(
        0.0, ge=0.0, description="per-message (per ring hop) software time, added to link delay"
    )
    software_overhead_by_collective: dict[str, float] = Field(
        default_factory=dict, description="per-collective override of software_overhead_s"
    )
    loopback_bandwidth_bps: float | None = Field(
        None, ge=0.0, description="reference only: gloo all_reduce goodput over 127.0.0.1"
    )
    compression_s_per_param: dict[str, float] = Field(
        default_factory=dict,
        description="reference only: encode + decode seconds per parameter per step, by scheme (calibrate prints it)",
    )
    encode_s_per_param: dict[str, float] = Field(
        default_factory=dict, description="encode seconds per parameter per step, by scheme"
    )
    decode_s_per_param: dict[str, float] = Field(
        default_factory=dict, description="decode seconds per parameter per step, by scheme"
    )
    encode_s_per_tensor: dict[str, float] = Field(
        default_factory=dict, description="encode seconds per tensor per step, by scheme"
    )
    decode_s_per_tensor: dict[str, float] = Field(
        default_factory=dict, description="decode seconds per tensor per step, by scheme"
    )
    encode_s_per_param_large: dict[str, float] = Field(
        default_factory=dict, description="encode seconds per parameter on a large model (at large_params), by scheme"
    )
    decode_s_per_param_large: dict[str, float] = Field(
        default_factory=dict, description="decode seconds per parameter on a large model (at large_params), by scheme"
    )
    params_at: int = Field(
        0, ge=0, description="parameters of the model the per-parameter costs were measured on (0: size-independent)"
    )
    large_params: int = Field(0, ge=0, description="parameters of the large model of the *_large costs")
    acks_per_segment: float = Field(
        0.5, ge=0.0, le=1.0, description="pure ACK frames per data segment on the reverse path"
    )
    kernel_hz: int = Field(
        DEFAULT_KERNEL_HZ,
        ge=1,
        le=100_000,
        description="the host kernel's CONFIG_HZ, the tick of its TCP timers (a file without it: the kernel's default)",
    )
    notes: dict[str, ShownText] = Field(
        default_factory=dict, description="how each value was obtained, or why it was skipped"
    )

    def wakeup_segments(self) -> float:
        """Frames this host delivers back-to-back while a gloo reader wakes (how many of a train it ACKs one per two):
        the measured per-message software time at the measured loopback rate; the framing's default where either is
        unmeasured."""
        if self.software_overhead_s <= 0 or not self.loopback_bandwidth_bps:
            return DEFAULT_WAKEUP_SEGMENTS
        return wakeup_segments(self.software_overhead_s, self.loopback_bandwidth_bps)

    def framing(self, **settings: Any) -> Framing:
        """The framing this host's senders and receivers see (its ACK constants, its timers' tick), with ``settings``
        (``mtu``, an explicit ``acks_per_segment``) on top; pydantic.ValidationError for a bad one."""
        base = {
            "acks_per_segment": self.acks_per_segment,
            "wakeup_segments": self.wakeup_segments(),
            "kernel_hz": self.kernel_hz,
        }
        return Framing(**{**base, **settings})

    def overhead(self, collective: str) -> float:
        """Software overhead per message for ``collective`` (its override, else the common value)."""
        return self.software_overhead_by_collective.get(collective, self.software_overhead_s)

    def resolve(self, key: str) -> str:
        """The key whose constants a prediction for cost key ``key`` uses: itself when measured, else its
        replicator's default-settings key (measured or not)."""
        return key if self.measured(key) else scheme_of(key)

    def compression(self, scheme: str) -> float:
        """Seconds per parameter per step of ``scheme``'s encode + decode (0 when not measured); ``scheme`` may be a
        cost key.
        """
        scheme = self.resolve(scheme)
        return self.encode_s_per_param.get(scheme, 0.0) + self.decode_s_per_param.get(scheme, 0.0)

    def encode_decode_s(self, scheme: str, params: float, tensors: int) -> tuple[float, float]:
        """(encode, decode) seconds per step of ``scheme`` on ``params`` parameters in ``tensors`` tensors.

        ``scheme`` may be a cost key (:func:`cost_key`); one not measured uses its replicator's default
        settings' constants; one measured under neither costs nothing.
        """
        scheme = self.resolve(scheme)
        if scheme not in self.encode_s_per_param:
            return 0.0, 0.0
        a_enc = self.per_param_at(self.encode_s_per_param[scheme], self.encode_s_per_param_large.get(scheme), params)
        a_dec = self.per_param_at(
            self.decode_s_per_param.get(scheme, 0.0), self.decode_s_per_param_large.get(scheme), params
        )
        enc = a_enc * params + self.encode_s_per_tensor.get(scheme, 0.0) * tensors
        dec = a_dec * params + self.decode_s_per_tensor.get(scheme, 0.0) * tensors
        return enc, dec

    def per_param_at(self, small: float, large: float | None, params: float) -> float:
        """Cost per parameter of a model of ``params`` parameters: ``small`` at ``params_at`` and below, ``large`` at
        ``large_params`` and above, interpolated in log(params) between (``small`` when no large cost was measured).
        """
        lo, hi = self.params_at, self.large_params
        if large is None or lo <= 0 or hi <= lo or params <= lo:
            return small
        if params >= hi:
            return large
        w = math.log(params / lo) / math.log(hi / lo)
        return small + w * (large - small)

    def measured(self, scheme: str) -> bool:
        """True when ``scheme``'s (a name or cost key) encode/decode cost was measured on this host (not a default)."""
        return scheme in self.encode_s_per_param

    def digest(self) -> str:
        """A short fingerprint of the constants, so a prediction names exactly which calibration it used."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]

    def identity(self, path: str | Path | None = None) -> dict[str, str | None]:
        """What a stored prediction records about the calibration it used."""
        return {
            "source": self.source,
            "digest": self.digest(),
            "created": self.created or None,
            "host": self.host or None,
            "path": str(path) if path else None,
        }


def default_path() -> Path | None:
    """``$NETBENCH_CALIBRATION`` if set, else None (the host's cache entry is used)."""
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else None


def read_calibration(target: Path) -> Calibration:
    """The calibration saved at ``target``; a missing, unreadable or invalid file is a CalibrationError (one line that
    never shows the file's values)."""
    where = f"{untrusted.CALIBRATION.what} {untrusted.shown_path(target)}"
    try:
        data = untrusted.read_json(target, untrusted.CALIBRATION)
    except untrusted.BadInput as exc:
        raise CalibrationError(f"{exc} (re-run netbench calibrate)") from None
    if not isinstance(data, dict):
        raise CalibrationError(f"{where}: expected a JSON object (re-run netbench calibrate)")
    try:
        return Calibration.model_validate(data)
    except pydantic.ValidationError as exc:
        raise CalibrationError(
            f"{one_line(exc, prefix=f'{where}: ', echo=False)} (re-run netbench calibrate)"
        ) from None


def save_calibration(calibration: Calibration, path: str | Path) -> Path:
    """Write ``calibration`` as JSON atomically (a unique temporary file renamed over the target); returns the path."""
    target = Path(path).expanduser()
    safe_files.make_folder(target.parent)  # UnsafeOutput (a ValueError) for a folder a stranger could redirect
    safe_files.write_text(target, calibration.model_dump_json(indent=2) + "\n")
    return target
