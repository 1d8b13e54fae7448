"""How raw Bayer samples become RGB, decided once for the CUDA kernels and
the display's CPU stage: black level, white-balance gains and gamma.

This is a raw preview and inference path, not an ISP: bilinear demosaic,
no exposure control, no colour-correction matrix, no noise or lens
shading correction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from sits.errors import UsageError
from sits.options import FLOAT, INT, STR, Option

#: white balance: fixed gains, or "auto" (grey world: each frame's mean R and
#: B scaled to its mean G)
AUTO = "auto"


@dataclass(frozen=True)
class RawOptions:
    """`black_level` in the format's own sample units (e.g. 64 of 1023 for
    10 bits); `gains` (R, G, B) or AUTO; `gamma` the display gamma the
    linear values are encoded with (2.2: out = v ** (1 / 2.2); 1: none)."""

    black_level: int = 0
    gains: tuple[float, float, float] | str = (1.0, 1.0, 1.0)
    gamma: float = 1.0

    def check(self, bits: int) -> None:
        top = (1 << bits) - 1
        if not 0 <= self.black_level < top:
            raise UsageError(f"black level {self.black_level} is outside 0..{top - 1} for {bits}-bit samples")
        if self.gains != AUTO:
            if len(self.gains) != 3 or not all(math.isfinite(g) and g > 0 for g in self.gains):
                raise UsageError(f"white-balance gains {self.gains} must be three positive numbers (R, G, B)")
        if not (math.isfinite(self.gamma) and 0.1 <= self.gamma <= 10):
            raise UsageError(f"gamma {self.gamma} must be 0.1 to 10")

    def linear(self, bits: int, gains: tuple[float, float, float] | None = None) -> list[tuple[float, float]]:
        """(scale, offset) of R, G and B: a sample v becomes v * scale +
        offset, in [0, 1] before clamping; `gains` for AUTO's of a frame."""
        g = gains if gains is not None else ((1.0, 1.0, 1.0) if self.gains == AUTO else self.gains)
        span = float((1 << bits) - 1 - self.black_level)
        return [(k / span, -self.black_level * k / span) for k in g]

    @property
    def inv_gamma(self) -> float:
        return 1.0 / self.gamma


#: the options that set RawOptions, declared once (sits capture's, open_chain's
#: keywords: sits.pipeline.capture.OPTIONS takes them in)
OPTIONS = (
    Option(("--black-level",), "black_level", INT, None,
           "Raw Bayer: the sensor's black level, in its sample units (e.g. 64 of 1023 for 10 bits).", min=0),
    Option(("--white-balance",), "white_balance", STR, None,
           f"Raw Bayer: R,G,B gains, e.g. 1.8,1,1.5; or {AUTO} (grey world, each frame; the display's stage)."),
    Option(("--gamma",), "gamma", FLOAT, None,
           "Raw Bayer: encode the linear values with this gamma (2.2 for a screen; default 1: linear).",
           min=0.1, max=10),
)


def given(black_level: int | None = None, white_balance=None, gamma: float | None = None) -> RawOptions | None:
    """RawOptions from OPTIONS' values (None: that one's default), or None
    when none is given; `white_balance` "R,G,B", AUTO or a tuple."""
    if black_level is None and white_balance is None and gamma is None:
        return None
    gains = white_balance
    if isinstance(gains, str) and gains != AUTO:
        try:
            gains = tuple(float(v) for v in gains.split(","))
        except ValueError:
            gains = ()
        if len(gains) != 3:
            raise UsageError(f"--white-balance {white_balance!r}: give R,G,B (e.g. 1.8,1,1.5) or {AUTO}") from None
    return RawOptions(black_level if black_level is not None else 0,
                      gains if gains is not None else (1.0, 1.0, 1.0), gamma if gamma is not None else 1.0)


#: the CUDA stage's kernels take fixed gains
AUTO_NOT_ON_GPU = (f"--white-balance {AUTO} is the display stage's; the CUDA stage takes fixed gains "
                   "(R,G,B, e.g. 1.8,1,1.5)")


def not_raw(code: str) -> UsageError:
    """The refusal of raw options for a format that is not raw Bayer."""
    return UsageError(f"--black-level, --white-balance and --gamma are for raw Bayer cameras; {code} is not raw Bayer")


def grey_world(means: tuple[float, float, float], black_level: int) -> tuple[float, float, float]:
    """Gains that bring a frame's mean R and B to its mean G (above black)."""
    r, g, b = (max(m - black_level, 1e-6) for m in means)
    return (g / r, 1.0, g / b)
