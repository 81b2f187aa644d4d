"""Figures of photos, shown as JPEG: a notebook that stores its outputs stays small enough to read and diff.

Matplotlib's inline backend stores every figure as PNG, which is lossless and right for plots, but a grid of
photo-like images (noise, texture) compresses badly as PNG: one MixUp grid was 570 KB. The same figure as a
JPEG is a fifth of that and looks the same at its size.
"""

from __future__ import annotations

import io
from typing import Any

#: JPEG quality for photo figures: above 80 the text of titles and ticks shows no ringing at notebook sizes.
QUALITY = 85


def jpeg_bytes(fig: Any, quality: int = QUALITY) -> bytes:
    """``fig`` (a matplotlib Figure) rendered at its own dpi as JPEG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="jpeg", dpi=fig.dpi, pil_kwargs={"quality": quality})
    return buffer.getvalue()


def show_as_jpeg(fig: Any, quality: int = QUALITY) -> None:
    """Show ``fig`` in the notebook as a JPEG instead of the inline PNG, and close it (so it is shown once)."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    data = jpeg_bytes(fig, quality)
    plt.close(fig)
    display(Image(data=data, format="jpeg"))
