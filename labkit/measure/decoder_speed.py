"""How fast each decoder turns the same encoded images into uint8 tensors, on this machine, in this process.

One measurement serves every place that picks a decoder by speed: the bottleneck explainer (which
names only decoders clearly faster than the one in use) and the ablation (whose fastest version uses
the fastest here). Each decoder gets one warm-up call (imports, first allocations) before it is timed,
and the figure is the median of ``repeats`` passes over all the images, so one slow pass (another
process taking the core) does not decide the choice.
"""

from __future__ import annotations

from collections.abc import Sequence

from labkit.core.errors import LabkitValueError
from labkit.core.timing import time_calls
from labkit.decode.decoder_contract import MAX_PIXELS, OUTPUT_SIZE, Size
from labkit.decode.registry import DECODERS, get_decoder


def time_decoders(
    blobs: Sequence[bytes],
    size: Size = OUTPUT_SIZE,
    max_pixels: int = MAX_PIXELS,
    repeats: int = 3,
    decoders: Sequence[str] = tuple(DECODERS),
) -> dict[str, float]:
    """Seconds per image for each of ``decoders`` on ``blobs`` at output ``size`` (median of ``repeats`` passes)."""
    if not blobs:
        raise LabkitValueError("time_decoders needs at least one encoded image")
    if repeats < 1:
        raise LabkitValueError(f"repeats={repeats}: time at least one pass")
    times = {}
    for name in decoders:
        fn = get_decoder(name)
        fn(blobs[0], size, max_pixels)  # the first call pays imports
        times[name] = time_calls(lambda fn=fn: [fn(b, size, max_pixels) for b in blobs], repeats).median / len(blobs)
    return times
