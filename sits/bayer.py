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


def options(black_level: int | None = None, gains=None, gamma: float | None = None) -> RawOptions:
    """RawOptions from command-line values (None: the default); `gains`
    "R,G,B", "auto" or a tuple."""
    if isinstance(gains, str):
        if gains == AUTO:
            pass
        else:
            try:
                gains = tuple(float(v) for v in gains.split(","))
            except ValueError:
                raise UsageError(f"white-balance gains {gains!r}: give R,G,B (e.g. 1.8,1,1.6) or {AUTO}") from None
    return RawOptions(black_level if black_level is not None else 0,
                      gains if gains is not None else (1.0, 1.0, 1.0), gamma if gamma is not None else 1.0)


def grey_world(means: tuple[float, float, float], black_level: int) -> tuple[float, float, float]:
    """Gains that bring a frame's mean R and B to its mean G (above black)."""
    r, g, b = (max(m - black_level, 1e-6) for m in means)
    return (g / r, 1.0, g / b)
