"""MuLoCo's declaration (Thérien et al. 2025, arXiv 2505.23725; facebookresearch/MuLoCo,
``torchtitan/components/quantized_outer_sgd.py``): DiLoCo with Muon as the inner optimizer and an error-fed outer
gradient, so the outer exchange can be quantized hard (2 bits in the paper) with little loss.

Every ``sync_every`` steps each rank folds its pseudo-gradient into an error buffer (``e = error_decay e + delta``),
sends what the wire makes of it (``quant_bits``: the quantized ring's chunks; else ``grad_dtype``) and keeps the rest
in the buffer. The wire is DiLoCo's, byte for byte (:func:`netbench.declarations.diloco_spec.payload`).
"""

from __future__ import annotations

from netbench.declarations import diloco_spec
from netbench.declarations.diloco_spec import DiLoCoSettings
from netbench.declarations.shared_settings import ErrorFeedbackSettings
from netbench.declarations.spec import ReplicatorSpec, Settings, TestPreset


def state_bytes(config: Settings) -> float:
    """DiLoCo's (the inner optimizer's 8: AdamW's two moments on vectors and embeddings, the larger; Muon keeps one
    momentum, 4, on matrices), and the error buffer, fp32 (4)."""
    return diloco_spec.state_bytes(config) + 4


class MuLoCoSettings(DiLoCoSettings, ErrorFeedbackSettings):
    """MuLoCo's settings: DiLoCo's and the decay of the error buffer its outer gradient accumulates in."""


SPEC = ReplicatorSpec(
    # DiLoCo's 80 (its H100 profile) and the error feedback's 32 a sync (decay and add, 12; the wire's rounding, 8;
    # its subtraction, 12): the feedback counted from its operations, not measured on an accelerator
    codec_bytes_per_param=112,
    state_bytes_per_param=state_bytes,
    name="muloco",
    summary="DiLoCo with Muon inner steps; the pseudo-gradient error-fed, then all-reduced (quantized: the ring)",
    collective="periodic all-reduce",
    payload=diloco_spec.payload,
    codec="netbench.replicators.muloco:MuLoCoReplicator",
    order=11,
    settings=MuLoCoSettings,
    test_preset=TestPreset(
        check=dict(sync_every=2, lr=0.01),
        train=dict(sync_every=10, lr=0.005, quant_bits=8, error_decay=0.9),
        variants={"2bit": dict(sync_every=3, quant_bits=2, quant_block=32, error_decay=0.9)},
    ),
    cost_settings=diloco_spec.SPEC.cost_settings,
    # The calibration times the outer sync's codec, which Muon is no part of; torch's Muon orthogonalises in bf16,
    # which a CPU runs at 24-53 s a step for one gpt2-small matrix, so the timed steps step with AdamW instead
    calibrated_with={"optimizer": "adamw"},
    color="",  # a free palette colour
    period=diloco_spec.period,
)
