"""One direction of one link: its rate, delay, jitter and loss (the same object for access links and trunks).

Pure data: the emulator shapes it (tbf, netem or the delay line), the model reads it, and a topology file or a
command line writes it. Ranges are what one Linux host can emulate faithfully with tbf.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netbench.units import format_rate, format_time

__all__ = ["MIN_RATE_BPS", "MAX_RATE_BPS", "MAX_EMULATED_DELAY_S", "DirectionSpec"]

MIN_RATE_BPS = 10e6
MAX_RATE_BPS = 10e9
MAX_EMULATED_DELAY_S = 1.0  # one-way delay (and jitter) one direction of a link may add


class DirectionSpec(BaseModel):
    """Shaping of one direction of one link."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False
    )  # inf or nan would pass every range check

    rate_bps: float = Field(description="line rate in bits per second")
    delay_s: float = Field(0.0, description="one-way delay added on this direction")
    jitter_s: float = Field(0.0, description="standard deviation of the added delay")
    loss: float = Field(0.0, description="probability that a packet is dropped")

    @field_validator("rate_bps")
    @classmethod
    def _rate_in_range(cls, v: float) -> float:
        if not MIN_RATE_BPS <= v <= MAX_RATE_BPS:
            raise ValueError(
                f"must be between {format_rate(MIN_RATE_BPS)} and {format_rate(MAX_RATE_BPS)}, got "
                f"{format_rate(v) if v > 0 else v}"
            )
        return v

    @field_validator("delay_s", "jitter_s")
    @classmethod
    def _time_in_range(cls, v: float) -> float:
        if not 0 <= v <= MAX_EMULATED_DELAY_S:
            raise ValueError(
                f"must be between 0 and {format_time(MAX_EMULATED_DELAY_S)}, got "
                f"{format_time(v) if v >= 0 else f'{v * 1e3:g}ms'}"
            )
        return v

    @field_validator("loss")
    @classmethod
    def _loss_in_range(cls, v: float) -> float:
        if not 0 <= v <= 0.5:
            raise ValueError(f"must be between 0% and 50%, got {v * 100:g}%")
        return v

    @property
    def impaired(self) -> bool:
        """True when delay, jitter or loss needs an engine beyond the rate shaper."""
        return self.delay_s > 0 or self.jitter_s > 0 or self.loss > 0
