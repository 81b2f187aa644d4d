"""Where one call of a real decoder spends its time: each decoder marks the end of each of its stages on a lap clock
it is handed, so the stage timer (`labkit.diagnose.stage_timing`) times the decoder the datasets run, not a second
implementation of it.

The stages are the article's (decode → resize → to tensor), in the decoder's own order: ``pil`` resizes the Pillow
image before it becomes a tensor; the others make a tensor view of the decoded pixels and resize that. A stage a
call does not need (no resize when the image is already the output size) is marked anyway, with the few
microseconds it took, so every call reports every stage. Without a clock (the hot path) a decoder pays one ``is
None`` test a stage.
"""

from __future__ import annotations

from labkit.core.timing import Stopwatch

#: A decoder's stages, each marked once a call.
DECODER_STAGES = ("decode", "resize", "to-tensor")


class StageLaps:
    """Seconds of each stage of one decoder call, in the order the decoder ran them (``seconds``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._watch = Stopwatch()

    def __call__(self, stage: str) -> None:
        """``stage`` has just ended: the time since the previous mark (or since the clock was made) is its."""
        self.seconds[stage] = self.seconds.get(stage, 0.0) + self._watch.lap()


def lap(laps: StageLaps | None, stage: str) -> None:
    """Mark the end of ``stage`` on ``laps`` where a clock was handed in."""
    if laps is not None:
        laps(stage)
