"""Video-like clips stored as folders of JPEG frames (``root/<class>/<clip>/frameNNN.jpg``).

The heavy two-step preprocessing of article section 4.3: decode every frame of a clip (stage 1),
then resize, crop and lay out as C×H×W (stage 2). The same two functions serve the
single-stage `ClipFolderDataset` and the two-stage `labkit.workers.staged_pipeline.StagedPipeline`, so the
two can be measured on identical work.

`LoaderRunner` and `PipelineRunner` measure them side by side. Both log each step from inside the
process that runs it (a `SharedLog`), so a run reports more than clips/s: each clip's latency (its
decode starting -> the clip arriving in the main loop), how long each stage took in each process, and
a timeline of who did what. Those are the numbers that say whether a pipeline's stages are balanced,
which decides whether it can beat a DataLoader with as many processes.

Each starts its processes once and reuses them for every pass (``persistent_workers``, a persistent
`StagedPipeline`): under the spawn start method (macOS, Windows) each process start imports torch again,
seconds each, and a lab that measures several settings a few passes each would spend most of its time
starting processes.
"""

from __future__ import annotations

import functools
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from labkit.core.errors import LabkitFileNotFoundError
from labkit.core.plotting import pyplot
from labkit.core.shared_log import SharedLog
from labkit.core.string_table import PathLike, StringTable
from labkit.core.timing import Stopwatch, timestamp
from labkit.decode.decoder_contract import DecodeError, describe_failure
from labkit.decode.pil_decoders import open_image
from labkit.workers.staged_pipeline import StagedPipeline
from labkit.workers.thread_budget import torch_threads
from labkit.workers.worker_stop import close_loader


def scan_clips(root: PathLike) -> tuple[list[str], StringTable, np.ndarray]:
    """Class names, clip folders (relative to ``root``) and labels of a clip tree."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise LabkitFileNotFoundError(f"{root}: not a folder; make clips with `labkit data --clips N --out {root}`")
    classes = sorted(d for d in os.listdir(root) if not d.startswith(".") and os.path.isdir(os.path.join(root, d)))
    clips, labels = [], []
    for label, cls in enumerate(classes):
        for clip in sorted(os.listdir(os.path.join(root, cls))):
            if os.path.isdir(os.path.join(root, cls, clip)):
                clips.append(os.path.join(cls, clip))
                labels.append(label)
    if not clips:
        raise LabkitFileNotFoundError(f"{root}: no clip folders (root/<class>/<clip>/frameNNN.jpg)")
    return classes, StringTable.from_strings(clips), np.asarray(labels, dtype=np.int64)


def decode_clip(folder: str, frames: int, size: tuple[int, int]) -> np.ndarray:
    """Stage 1: the first ``frames`` JPEG frames of a clip folder → uint8 array (T, H, W, 3).

    ``size`` is (height, width) of the stored frames, as everywhere in labkit; a frame of any other size
    is an error naming the file, because the shared-memory slots downstream have a fixed shape.
    """
    names = sorted(f for f in os.listdir(folder) if f.lower().endswith((".jpg", ".jpeg")))[:frames]
    if len(names) < frames:
        raise DecodeError(f"{folder}: {len(names)} frames, need {frames}")
    height, width = size
    out = np.empty((frames, height, width, 3), dtype=np.uint8)
    for t, name in enumerate(names):
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            data = f.read()
        try:
            img = open_image(data)
            if img.size != (width, height):
                raise DecodeError(f"frame is {img.size[0]}x{img.size[1]} (width x height), expected {width}x{height}")
            out[t] = np.asarray(img.convert("RGB"))
        except (OSError, SyntaxError, ValueError) as e:  # DecodeError is a ValueError
            raise DecodeError(f"{path}: {e if isinstance(e, DecodeError) else describe_failure(data, e)}") from None
    return out


def transform_clip(frames: np.ndarray, out: int = 112, resize: int = 128) -> np.ndarray:
    """Stage 2: (T, H, W, 3) → resize the short side to ``resize``, centre-crop ``out``, (T, 3, out, out)."""
    t, h, w, _ = frames.shape
    scale = resize / min(h, w)
    new_w, new_h = max(out, round(w * scale)), max(out, round(h * scale))
    top, left = (new_h - out) // 2, (new_w - out) // 2
    result = np.empty((t, 3, out, out), dtype=np.uint8)
    for k in range(t):
        img = Image.fromarray(frames[k]).resize((new_w, new_h), Image.BILINEAR)
        result[k] = np.asarray(img)[top : top + out, left : left + out].transpose(2, 0, 1)
    return result


class ClipFolderDataset(Dataset):
    """Single-stage clip loading: both steps in one ``__getitem__``, for a DataLoader's workers."""

    def __init__(self, root: PathLike, frames: int, size: tuple[int, int], out: int = 112) -> None:
        self.root = os.fspath(root)
        self.classes, self.clips, self.labels = scan_clips(root)
        self.frames, self.size, self.out = frames, tuple(size), out

    def __len__(self) -> int:
        return len(self.clips)

    def clip_path(self, index: int) -> str:
        return os.path.join(self.root, self.clips[index])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        frames = decode_clip(self.clip_path(index), self.frames, self.size)
        return torch.from_numpy(transform_clip(frames, self.out)), int(self.labels[index])


STAGES = ("decode", "transform")


@dataclass(frozen=True)
class ClipWork:
    """The work per clip: decode ``frames`` stored frames of ``size`` (height, width), resize the short
    side to ``resize`` and centre-crop ``out``. A larger ``out``/``resize`` makes the second stage heavier."""

    frames: int
    size: tuple[int, int]
    out: int = 112
    resize: int = 128

    @property
    def frame_shape(self) -> tuple[int, int, int, int]:
        """The shape stage 1 writes into a ring slot: (T, H, W, 3)."""
        return (self.frames, self.size[0], self.size[1], 3)

    def decode(self) -> Callable[[str], np.ndarray]:
        return functools.partial(decode_clip, frames=self.frames, size=tuple(self.size))

    def transform(self) -> Callable[[np.ndarray], np.ndarray]:
        return functools.partial(transform_clip, out=self.out, resize=self.resize)


class LoggedStage:
    """A stage function that logs, from the process running it, when each call started and ended."""

    def __init__(self, fn: Callable[[Any], Any], stage: str, log: SharedLog) -> None:
        self.fn, self.stage, self.log = fn, stage, log

    def __call__(self, item: Any) -> Any:
        start = timestamp()
        out = self.fn(item)
        self.log.append(
            {
                "stage": self.stage,
                "pid": os.getpid(),
                "item": item if isinstance(item, str) else None,
                "start": start,
                "end": timestamp(),
            }
        )
        return out


class LoggedClipDataset(ClipFolderDataset):
    """`ClipFolderDataset` doing `ClipWork`'s two steps in one ``__getitem__``, each step logged."""

    def __init__(self, root: str, work: ClipWork, log: SharedLog) -> None:
        super().__init__(root, work.frames, work.size, work.out)
        self.work, self.log = work, log

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        decode = LoggedStage(self.work.decode(), "decode", self.log)
        transform = LoggedStage(self.work.transform(), "transform", self.log)
        frames = decode(self.clip_path(index))
        return torch.from_numpy(transform(frames)), int(self.labels[index])


@dataclass
class ClipRun:
    """One pass over every clip: when each arrived, and every stage call logged by the processes."""

    name: str
    start: float  # when the pass's first stage call began (monotonic seconds): starting processes is not counted
    arrivals: list[float]  # arrival time of clip k (monotonic seconds), in clip order
    decode_start: list[float]  # when clip k's decode began
    events: list[dict[str, Any]]

    @property
    def seconds(self) -> float:
        return max(self.arrivals) - self.start

    @property
    def clips_per_s(self) -> float:
        return len(self.arrivals) / self.seconds

    @property
    def latencies_s(self) -> list[float]:
        """Per clip: from its decode starting to its arrival in the main loop."""
        return [a - d for a, d in zip(self.arrivals, self.decode_start)]

    def stage_ms(self) -> dict[str, float]:
        """Median milliseconds of one call of each stage, as measured inside the run."""
        return {
            s: 1000 * statistics.median(e["end"] - e["start"] for e in self.events if e["stage"] == s) for s in STAGES
        }

    def busy(self) -> dict[tuple[str, int], float]:
        """(stage, pid) → share of the run that process spent in that stage."""
        shares: dict[tuple[str, int], float] = {}
        for e in self.events:
            key = (e["stage"], e["pid"])
            shares[key] = shares.get(key, 0.0) + (e["end"] - e["start"]) / self.seconds
        return shares

    def __str__(self) -> str:
        ms = self.stage_ms()
        return (
            f"{self.name}: {len(self.arrivals)} clips in {self.seconds:.2f} s, {self.clips_per_s:.1f} clips/s; "
            f"latency median {1000 * statistics.median(self.latencies_s):.0f} ms; per call: decode "
            f"{ms['decode']:.0f} ms, transform {ms['transform']:.0f} ms"
        )

    def plot(self, ax: Any = None) -> Any:
        """One lane per process, a bar per stage call (decode, transform); ticks where clips arrived."""
        plt = pyplot()

        ax = ax or plt.subplots(figsize=(8, 2.6))[1]
        pids = sorted(
            {e["pid"] for e in self.events}, key=lambda p: min(e["start"] for e in self.events if e["pid"] == p)
        )
        lanes = {pid: k for k, pid in enumerate(pids)}
        for e in self.events:
            color = f"C{STAGES.index(e['stage'])}"
            ax.barh(
                lanes[e["pid"]] + 1,
                e["end"] - e["start"],
                left=e["start"] - self.start,
                height=0.6,
                color=color,
                edgecolor="white",
                linewidth=0.5,
            )
        ax.plot([a - self.start for a in self.arrivals], [0] * len(self.arrivals), "|", color="black", markersize=10)
        ax.set_yticks(range(len(pids) + 1), ["main loop"] + [f"process {k + 1}" for k in range(len(pids))])
        ax.set_xlim(left=0)
        ax.set_xlabel("seconds since the pass's first stage call")
        ax.set_title(self.name)
        handles = [plt.Rectangle((0, 0), 1, 1, color=f"C{k}") for k in range(len(STAGES))]
        ax.legend(handles, STAGES, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
        return ax


def _first_call(events: Sequence[dict[str, Any]], default: float) -> float:
    """When the first stage call of a pass began: its clock starts there, not when its processes were started
    (under spawn, seconds of importing torch that neither a DataLoader nor a pipeline would pay every epoch)."""
    return min((e["start"] for e in events), default=default)


class LoaderRunner:
    """Passes of every clip under ``root`` through one DataLoader whose workers each do both steps of a clip;
    its workers start with the first pass and are reused (``persistent_workers``) until `close`."""

    def __init__(self, root: str, work: ClipWork, num_workers: int) -> None:
        self.log = SharedLog("labkit-clips-")
        self.dataset = LoggedClipDataset(root, work, self.log)
        self.loader = DataLoader(
            self.dataset, batch_size=None, num_workers=num_workers, persistent_workers=num_workers > 0
        )
        self.name = f"DataLoader, {num_workers} worker{'s' if num_workers != 1 else ''}"

    def run(self) -> ClipRun:
        """One pass over every clip (the first one also starts the workers)."""
        mark = self.log.mark()
        arrivals: list[float] = []
        start = timestamp()
        for _ in self.loader:
            arrivals.append(timestamp())
        events = self.log.records(mark)
        by_path = {e["item"]: e["start"] for e in events if e["stage"] == "decode"}
        decode_start = [by_path[self.dataset.clip_path(k)] for k in range(len(arrivals))]  # arrive in index order
        return ClipRun(self.name, _first_call(events, start), arrivals, decode_start, events)

    def close(self) -> None:
        """Stop the workers (a no-op when none run)."""
        close_loader(self.loader)

    def __enter__(self) -> LoaderRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class PipelineRunner:
    """Passes of every clip under ``root`` (or the clip folders ``items``) through one persistent
    `StagedPipeline`: its processes start with the first pass and are reused until `close`."""

    def __init__(
        self,
        root: str,
        work: ClipWork,
        num_decoders: int,
        num_transformers: int,
        slots: int | None = None,
        items: Sequence[str] | None = None,
    ) -> None:
        self.log = SharedLog("labkit-clips-")
        if items is None:
            dataset = ClipFolderDataset(root, work.frames, work.size)
            items = [dataset.clip_path(k) for k in range(len(dataset))]
        self.folders = list(items)
        self.pipe = StagedPipeline(
            self.folders,
            LoggedStage(work.decode(), "decode", self.log),
            LoggedStage(work.transform(), "transform", self.log),
            work.frame_shape,
            num_decoders=num_decoders,
            num_transformers=num_transformers,
            slots=slots or 2 * (num_decoders + num_transformers),
            persistent=True,
        )
        self.name = f"pipeline, {num_decoders} decode + {num_transformers} transform"

    def run(self) -> ClipRun:
        """One pass over every clip (the first one also starts the processes)."""
        mark = self.log.mark()
        arrived: dict[int, float] = {}
        start = timestamp()
        for index, _ in self.pipe:
            arrived[index] = timestamp()
        events = self.log.records(mark)
        by_path = {e["item"]: e["start"] for e in events if e["stage"] == "decode"}
        order = sorted(arrived)
        return ClipRun(
            self.name,
            _first_call(events, start),
            [arrived[k] for k in order],
            [by_path[self.folders[k]] for k in order],
            events,
        )

    def close(self) -> None:
        """Stop the processes and unlink the ring (a no-op when nothing runs)."""
        self.pipe.close()

    def __enter__(self) -> PipelineRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def time_clip_stages(root: str, work: ClipWork, clips: int = 8) -> dict[str, list[float]]:
    """Seconds of each step for the first ``clips`` clips, run one after the other in this process on
    one thread: what each stage costs when nothing competes with it."""
    dataset = ClipFolderDataset(root, work.frames, work.size, work.out)
    decode, transform = work.decode(), work.transform()
    seconds: dict[str, list[float]] = {s: [] for s in STAGES}
    with torch_threads(1):
        for k in range(min(clips, len(dataset))):
            watch = Stopwatch()
            frames = decode(dataset.clip_path(k))
            seconds["decode"].append(watch.lap())
            transform(frames)
            seconds["transform"].append(watch.lap())
    return seconds
