"""DES-LOC's declaration (Iacob et al. 2025, arXiv 2505.22549): local Adam, the parameters and each of Adam's two
moments averaged on periods of their own, at the paper's recommended ratios K_u = 3 K_x and K_v = 6 K_x.

MT-DAO's codec with its quasi-hyperbolic weight at 1 and a first-moment decay of 0.9 is DES-LOC's local Adam, so this
declaration is MT-DAO's (its payload, its codec) over the settings :func:`as_mtdao` derives from ``params_every``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from netbench.declarations import mtdao_spec
from netbench.declarations.shared_settings import GradSettings, QuantSettings, StatePeriodSettings
from netbench.declarations.spec import PayloadDecl, ReplicatorSpec, Settings, TestPreset

if TYPE_CHECKING:
    from netbench.shapes import ParamShape

M1_RATIO = 3  # K_u / K_x, the paper's recommendation
M2_RATIO = 6  # K_v / K_x
BETA1 = 0.9  # Adam's first-moment decay: DES-LOC's inner optimizer is Adam, not MT-DAO's slow momentum
NU = 1.0  # QH-Adam's weight on the momentum: 1 is Adam's update


def as_mtdao(config: Settings) -> Settings:
    """``config`` as MT-DAO's codec and payload read it: the first moment averaged every 3 K_x steps, the second
    every 6 K_x, and Adam's update (nu 1, beta1 0.9)."""
    every = config.params_every
    return config.model_copy(update=dict(m1_every=M1_RATIO * every, m2_every=M2_RATIO * every, beta1=BETA1, nu=NU))


def period(config: Settings) -> int:
    return config.params_every


def payload(shapes: Sequence[ParamShape], config: Settings, world_size: int) -> PayloadDecl:
    return mtdao_spec.payload(shapes, as_mtdao(config), world_size)


class DESLOCSettings(GradSettings, StatePeriodSettings, QuantSettings):
    """DES-LOC's settings: its parameters' period K_x (the moments' follow at the paper's ratios) and the exchange's
    dtype or quantization."""


SPEC = ReplicatorSpec(
    codec_bytes_per_param=0,
    state_bytes_per_param=mtdao_spec.state_bytes,
    name="desloc",
    summary="local Adam; parameters, first and second moment all-reduced every K_x, 3 K_x and 6 K_x steps",
    collective="periodic all-reduce",
    payload=payload,
    codec="netbench.replicators.desloc:DESLOCReplicator",
    order=10,
    settings=DESLOCSettings,
    test_preset=TestPreset(
        check=dict(params_every=1, lr=0.01),
        train=dict(params_every=4, lr=0.01),
        variants={"int8": dict(params_every=2, quant_bits=8, quant_block=32)},
    ),
    cost_settings=("quant_bits", "quant_block"),  # quantized: its codec's encode and decode
    color="",  # a free palette colour
    period=period,
    encodes=lambda config: config.quant_bits > 0,  # dense: its local step is the apply time; quant_bits adds a codec
)
