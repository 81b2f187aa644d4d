"""Where ``__getitem__`` spends its time: one sample's stages timed apart, for each decoder (article §2.1).

The article calls ``__getitem__`` the costliest link of the chain: read the file → decode →
resize → to tensor → normalise. `time_stages` runs exactly that chain on real files: the read, the
decoder the datasets run (each of its stages marked on a lap clock as it ends,
`labkit.decode.stage_laps`), and the normalise, so a lab can draw where the milliseconds go and see which
stage a faster decoder removes. A file a decoder hands to Pillow (a PNG for ``simplejpeg``) is timed on
the path it takes.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from labkit.core.errors import LabkitKeyError, LabkitValueError
from labkit.core.plotting import pyplot
from labkit.core.timing import Stopwatch
from labkit.decode.decoder_contract import MAX_PIXELS, OUTPUT_SIZE, Size, target_hw
from labkit.decode.registry import DECODERS, get_decoder
from labkit.decode.stage_laps import StageLaps
from labkit.device.transfer import normalize_uint8
from labkit.workers.thread_budget import torch_threads

STAGES = ("read", "decode", "resize", "to-tensor", "normalise")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def run_stages(
    path: str, decoder: str, size: Size = OUTPUT_SIZE
) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """One sample read, decoded by ``decoder`` and normalised: (uint8 image, normalised float image, seconds per
    stage in the order they ran; every stage of `STAGES` once)."""
    decode = get_decoder(decoder)  # a clear error for an unknown name
    hw = target_hw(size)
    if hw is None:
        raise LabkitValueError("time_stages needs an output size: the resize is one of the stages")
    watch = Stopwatch()
    data = _read(path)
    seconds = {"read": watch.lap()}
    laps = StageLaps()
    image = decode(data, hw, MAX_PIXELS, laps=laps)
    seconds.update(laps.seconds)
    watch.lap()
    normalised = normalize_uint8(image)
    seconds["normalise"] = watch.lap()
    return image, normalised, seconds


@dataclass
class StageTimes:
    """Seconds per stage for every sample timed with one decoder."""

    decoder: str
    seconds: dict[str, list[float]]

    @property
    def median_ms(self) -> dict[str, float]:
        """Median milliseconds of each stage, over the samples, in `STAGES` order."""
        return {name: statistics.median(self.seconds[name]) * 1000 for name in STAGES}

    @property
    def total_ms(self) -> float:
        return sum(self.median_ms.values())

    def share(self, stage: str) -> float:
        """The stage's share of the sample's total (medians)."""
        return self.median_ms[stage] / self.total_ms if self.total_ms else 0.0

    @property
    def slowest(self) -> str:
        return max(STAGES, key=lambda name: self.median_ms[name])


def time_stages(paths: Sequence[str], decoder: str = "pil", size: Size = OUTPUT_SIZE, warmup: int = 2) -> StageTimes:
    """Run every file of ``paths`` through ``decoder``'s stages and time each stage of each sample.

    The first ``warmup`` files are run once untimed (imports, first allocations). Read times are of
    the page cache when the files were read recently: what the lab measures is the CPU's share.
    Torch runs on one thread meanwhile, as it does in a DataLoader worker (and two threads fighting
    other processes for a small machine's cores make the torch stages' times swing by 10x).
    """
    if not paths:
        raise LabkitValueError("time_stages needs at least one file")
    seconds: dict[str, list[float]] = {name: [] for name in STAGES}
    with torch_threads(1):
        for path in list(paths)[:warmup]:
            run_stages(path, decoder, size)
        for path in paths:
            for name, s in run_stages(path, decoder, size)[2].items():
                seconds[name].append(s)
    return StageTimes(decoder, seconds)


@dataclass
class StageReport:
    """`StageTimes` of several decoders on the same files, printed as a table and drawn as stacked bars."""

    results: list[StageTimes]
    samples: int

    def __getitem__(self, decoder: str) -> StageTimes:
        for result in self.results:
            if result.decoder == decoder:
                return result
        raise LabkitKeyError(f"no decoder {decoder!r} timed here; timed: {', '.join(r.decoder for r in self.results)}")

    def __str__(self) -> str:
        lines = [
            f"median ms per sample over {self.samples} files",
            f"{'decoder':<13}" + "".join(f"{name:>11}" for name in STAGES) + f"{'total':>9}  slowest",
        ]
        for r in self.results:
            ms = r.median_ms
            lines.append(
                f"{r.decoder:<13}"
                + "".join(f"{ms[name]:>11.2f}" for name in STAGES)
                + f"{r.total_ms:>9.2f}  {r.slowest} ({r.share(r.slowest):.0%})"
            )
        return "\n".join(lines)

    def plot(self, ax: Any = None) -> Any:
        """One stacked bar per decoder: the median ms of each stage."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(7, 3.5))[1]
        names = [r.decoder for r in self.results]
        bottom = np.zeros(len(names))
        for k, stage in enumerate(STAGES):
            ms = np.array([r.median_ms[stage] for r in self.results])
            ax.bar(names, ms, bottom=bottom, label=stage, color=f"C{k}")
            bottom += ms
        ax.set_ylabel("ms per sample (median)")
        ax.set_xlabel("decoder")
        ax.set_title(f"Where __getitem__ spends its time ({self.samples} files)")
        ax.legend(loc="upper right", fontsize="small")
        return ax


def compare_decoders(
    paths: Sequence[str], decoders: Sequence[str] = tuple(DECODERS), size: Size = OUTPUT_SIZE, progress: bool = True
) -> StageReport:
    """`time_stages` for each decoder on the same files, one after the other."""
    from tqdm.auto import tqdm

    results = [
        time_stages(paths, d, size) for d in tqdm(decoders, desc="decoders", unit="decoder", disable=not progress)
    ]
    return StageReport(results, len(paths))
