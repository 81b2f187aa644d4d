"""The notebooks' interactive panels: sliders a learner moves to feel a knob of the input pipeline.

`LoaderPanel` (notebook 04) measures a DataLoader for the settings on its sliders and keeps every
run in a history table and a plot, so a learner sees each experiment they made side by side.
Before it runs, it shows the doctor's findings for those settings, and it refuses a setting that
would overflow /dev/shm. `SamplerPanel` (notebook 02) shows how block size and window trade the
randomness of a `BlockShuffleSampler` order against the locality of its reads.

Both work without a widget frontend (nbconvert, nbval, plain Python): ``run(...)`` and
``update(...)`` are the callbacks the widgets call, and ``show()`` prints its results as text
beside the widget. This is the only labkit module that imports ipywidgets.
"""

from __future__ import annotations

import gc
import html
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import ipywidgets as w
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch.utils.data import SubsetRandomSampler

from labkit.core.cpus import cpu_budget
from labkit.core.environment import usable_cpus
from labkit.core.errors import LabkitTypeError, LabkitValueError, LabkitWarning
from labkit.core.machine import MemoryFacts
from labkit.core.timing import Stopwatch
from labkit.datasets.pack_datasets import DecodedArrayDataset
from labkit.datasets.storage_kinds import DECODED_PACK, FOLDER, PACK
from labkit.decode.registry import DECODERS
from labkit.diagnose.doctor import Finding, LoaderPlan, diagnose
from labkit.harness.workspace import Workspace
from labkit.measure.loader_timing import measure_loader, spread_indices
from labkit.samplers.block_shuffle import BlockShuffleSampler
from labkit.samplers.order_scores import OrderScores, score_order
from labkit.workers.loader_factory import make_loader
from labkit.workers.thread_budget import main_thread_budget, torch_threads

STORAGES = (FOLDER, PACK, DECODED_PACK)  # what a CPU loader reads; an encoded pack is for the GPU
BATCH_SIZES = (8, 16, 32, 64, 128)


@dataclass(frozen=True)
class LoaderSettings:
    """One point in the loader's knob space: what the panel's controls say."""

    num_workers: int = 1
    prefetch_factor: int = 2
    batch_size: int = 32
    pin_memory: bool = False
    persistent_workers: bool = True
    decoder: str = "pil-reduced"
    storage: str = PACK


KNOBS = tuple(f.name for f in fields(LoaderSettings))


@dataclass(frozen=True)
class LoaderRun:
    """One experiment: the settings, and what was measured (or why it was refused)."""

    settings: LoaderSettings
    images_per_s: float | None  # None when refused
    step_ms: float | None  # ms per batch: the images of a batch ÷ images/s, as everywhere in the kit
    passes: int  # measured passes (epochs of the panel's subset), after one warm-up pass
    seconds: float  # wall time of the whole run, worker start-up included
    note: str = ""
    rates: tuple[float, ...] = ()  # images/s of each measured pass: their spread is the noise

    def row(self) -> dict[str, Any]:
        return {
            **asdict(self.settings),
            "images/s": self.images_per_s,
            "step ms": self.step_ms,
            "passes": self.passes,
            "seconds": round(self.seconds, 1),
            "note": self.note,
        }

    def __str__(self) -> str:
        s = self.settings
        knobs = (
            f"{s.storage}, {s.decoder if s.storage != DECODED_PACK else 'no decode'}, workers {s.num_workers}, "
            f"prefetch {s.prefetch_factor}, batch {s.batch_size}, pin {s.pin_memory}, "
            f"persistent {s.persistent_workers}"
        )
        if self.images_per_s is None:
            return f"{knobs}: refused: {self.note}"
        text = f"{knobs}: {self.images_per_s:.0f} images/s, step {self.step_ms:.1f} ms ({self.passes} passes)"
        return text + (f" [{self.note}]" if self.note else "")


def measure_settings(
    workspace: Workspace,
    s: LoaderSettings,
    images: int = 128,
    runs: int = 3,
    seconds: float = 5.0,
    size: int | None = None,
) -> LoaderRun:
    """Images/s of a loader with settings ``s`` over ``images`` samples of ``workspace``: what a panel run measures.

    The samples are spread over the data set and read in a random order; the loader comes from
    `labkit.workers.loader_factory.make_loader`, the main process gets the cores the workers leave. One warm-up
    pass (worker start-up, cold caches), then `labkit.measure.loader_timing.measure_loader` passes of one epoch
    each until ``runs`` are measured or ``seconds`` have gone by. The time limit is checked
    between passes, so a run lasts at most one pass longer; a stuck worker raises after
    ``max(30, 4 × seconds)`` s instead of blocking.
    """
    watch = Stopwatch()
    size = size or DecodedArrayDataset(workspace.decoded_pack).size[-1]
    if s.storage not in STORAGES:
        raise LabkitValueError(f"storage {s.storage!r}: a panel measures one of {', '.join(STORAGES)}")
    dataset = workspace.open(s.storage, s.decoder, size)
    indices = spread_indices(len(dataset), images)
    dataset[indices[0]]  # import the decoder's libraries here, once: forked workers inherit them instead of each paying
    sampler = SubsetRandomSampler(indices, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():  # more workers than cores is what the panel lets one try: the doctor says so
        warnings.simplefilter("ignore", LabkitWarning)
        loader = make_loader(
            dataset,
            batch_size=s.batch_size,
            sampler=sampler,
            num_workers=s.num_workers,
            pin_memory=s.pin_memory,
            prefetch_factor=s.prefetch_factor if s.num_workers else None,
            persistent_workers=s.persistent_workers,
            hang_timeout=max(30.0, 4 * seconds) if s.num_workers else None,
        )
    rates: list[float] = []
    batch_images: list[float] = []  # images a batch, each pass (the last batch of a pass may be short)
    warmup = None
    try:
        with torch_threads(main_thread_budget(s.num_workers)):
            while len(rates) < runs:
                passed = measure_loader(loader, runs=1, warmup_runs=0)
                if warmup is None:
                    warmup = passed
                else:
                    rates.append(passed.images_per_s)
                    batch_images.append(passed.step_s * passed.images_per_s)
                if watch.elapsed >= seconds:
                    break
    finally:
        del loader
        gc.collect()  # stop the workers now, not at some later collection
    note = ""
    if not rates:  # the time limit came before a second pass: report the warm-up, and say so
        rates, batch_images = [warmup.images_per_s], [warmup.step_s * warmup.images_per_s]
        note = "warm-up pass only (start-up included): raise seconds= for a steady-state figure"
    images_per_s = float(np.median(rates))
    return LoaderRun(
        s,
        images_per_s,
        1000 * float(np.mean(batch_images)) / images_per_s,
        len(rates),
        watch.elapsed,
        note,
        tuple(rates),
    )


def _plan(s: LoaderSettings, size: int) -> LoaderPlan:
    return LoaderPlan(
        num_workers=s.num_workers,
        prefetch_factor=s.prefetch_factor,
        batch_size=s.batch_size,
        image=(3, size, size),
        pin_memory=s.pin_memory,
        main_threads=main_thread_budget(s.num_workers),
    )


def _findings_html(findings: list[Finding]) -> str:
    colour = {"ok": "#2a7d2a", "warn": "#b36b00", "fail": "#b00020"}
    items = "".join(
        f"<li><b style='color:{colour[f.level]}'>{f.level.upper()}</b> {html.escape(f.check)}: "
        f"{html.escape(f.message)}" + (f"<br><i>fix: {html.escape(f.fix)}</i>" if f.fix else "") + "</li>"
        for f in findings
    )
    return f"<div style='font-size:85%'><b>labkit doctor, for these settings:</b><ul>{items}</ul></div>"


def _table_html(runs: list[LoaderRun]) -> str:
    if not runs:
        return "<i>No run yet: press Run.</i>"
    head = ["#", *KNOBS, "images/s", "step ms", "passes", "note"]
    rows = []
    for k, run in enumerate(runs, 1):
        r = run.row()
        cells = [
            k,
            *(r[name] for name in KNOBS),
            "refused" if r["images/s"] is None else f"{r['images/s']:.0f}",
            "" if r["step ms"] is None else f"{r['step ms']:.1f}",
            r["passes"],
            r["note"],
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    return f"<table style='font-size:85%'>{header}{''.join(rows)}</table>"


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def _show_figure(out: w.Output, fig: Figure) -> None:
    """Draw ``fig`` into the panel's output area; without IPython there is no area to draw into."""
    if not _in_ipython():
        return
    from IPython.display import display

    with out:
        out.clear_output(wait=True)
        display(fig)


class LoaderPanel:
    """Sliders for a DataLoader's knobs, a Run button, a live plot of images/s and a history table.

    Each run is `measure_settings` for the controls' settings: a few seconds (``seconds``, checked
    between passes) over ``images`` samples. A pass is one epoch over those samples, so worker
    start-up is paid on every pass unless ``persistent_workers`` is on — with such short epochs it
    weighs more than in a real one. The doctor's findings (`labkit.diagnose.doctor.diagnose`) for the
    settings on the sliders are shown before anything runs; a setting whose batches would not fit
    in /dev/shm is refused with the doctor's reason. ``memory`` stands in for this machine's RAM
    and /dev/shm (tests).
    """

    def __init__(
        self,
        workspace: Workspace,
        settings: LoaderSettings | None = None,
        images: int = 128,
        runs: int = 3,
        seconds: float = 5.0,
        memory: MemoryFacts | None = None,
        max_workers: int | None = None,
    ) -> None:
        self.workspace, self.images, self.runs, self.seconds, self.memory = workspace, images, runs, seconds, memory
        self.size = DecodedArrayDataset(workspace.decoded_pack).size[-1]
        self.history: list[LoaderRun] = []
        self.x_knob = "num_workers"
        s = settings or LoaderSettings(num_workers=cpu_budget().workers_per_rank)
        top = max_workers if max_workers is not None else 2 * usable_cpus()
        style = {"description_width": "initial"}
        self.controls: dict[str, w.ValueWidget] = {
            "num_workers": w.IntSlider(
                s.num_workers,
                min=0,
                max=max(top, s.num_workers),
                description="num_workers",
                style=style,
                continuous_update=False,
            ),
            "prefetch_factor": w.IntSlider(
                s.prefetch_factor, min=1, max=8, description="prefetch_factor", style=style, continuous_update=False
            ),
            "batch_size": w.SelectionSlider(
                options=sorted(set(BATCH_SIZES) | {s.batch_size}),
                value=s.batch_size,
                description="batch_size",
                style=style,
                continuous_update=False,
            ),
            "pin_memory": w.Checkbox(s.pin_memory, description="pin_memory"),
            "persistent_workers": w.Checkbox(s.persistent_workers, description="persistent_workers"),
            # the decoder registry's names, read when the panel is built: a decoder added there shows up here
            "decoder": w.Dropdown(options=tuple(DECODERS), value=s.decoder, description="decoder"),
            "storage": w.Dropdown(options=STORAGES, value=s.storage, description="storage"),
        }
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.status = w.HTML()
        self.doctor = w.HTML()
        self.plot_out = w.Output()
        self.table = w.HTML(_table_html([]))
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.button.on_click(self._on_click)
        self._refresh_doctor()
        sliders = w.VBox([self.controls[k] for k in ("num_workers", "prefetch_factor", "batch_size")])
        switches = w.VBox([self.controls[k] for k in ("pin_memory", "persistent_workers", "decoder", "storage")])
        self.widget = w.VBox(
            [w.HBox([sliders, switches]), w.HBox([self.button, self.status]), self.doctor, self.plot_out, self.table]
        )

    # -- state ----------------------------------------------------------------------------------------
    @property
    def settings(self) -> LoaderSettings:
        """What the controls say now."""
        return LoaderSettings(**{k: c.value for k, c in self.controls.items()})

    def findings(self, settings: LoaderSettings | None = None) -> list[Finding]:
        """The doctor's findings for ``settings`` (default: the controls') on this machine."""
        return diagnose(_plan(settings or self.settings, self.size), facts=self.memory)

    def refusal(self, settings: LoaderSettings | None = None) -> str | None:
        """Why ``settings`` would not be run (a /dev/shm overflow), or None."""
        shm = next(f for f in self.findings(settings) if f.check == "shared memory")
        return f"{shm.message}. Fix: {shm.fix}" if shm.level == "fail" else None

    def _refresh_doctor(self) -> None:
        self.doctor.value = _findings_html(self.findings())
        self.controls["decoder"].disabled = self.controls["storage"].value == "decoded pack"

    def _on_change(self, change: dict[str, Any]) -> None:
        self._refresh_doctor()

    # -- running --------------------------------------------------------------------------------------
    def run(self, **changes: Any) -> LoaderRun:
        """Set the controls named in ``changes`` (e.g. ``num_workers=2``), then measure: the Run button's callback."""
        unknown = set(changes) - set(KNOBS)
        if unknown:
            raise LabkitTypeError(f"unknown loader setting(s) {sorted(unknown)}; the panel's knobs are {KNOBS}")
        for name, value in changes.items():
            self.controls[name].value = value
        settings = self.settings
        previous = next((r.settings for r in reversed(self.history) if r.images_per_s is not None), None)
        changed = [k for k in KNOBS if previous is not None and getattr(previous, k) != getattr(settings, k)]
        if changed and "storage" not in changed:  # a new storage is a new series along the same axis
            self.x_knob = changed[0]
        reason = self.refusal(settings)
        record = (
            LoaderRun(settings, None, None, 0, 0.0, reason)
            if reason
            else measure_settings(self.workspace, settings, self.images, self.runs, self.seconds, self.size)
        )
        self.history.append(record)
        self.table.value = _table_html(self.history)
        if record.images_per_s is not None:
            _show_figure(self.plot_out, self.figure())
        return record

    # -- what it shows --------------------------------------------------------------------------------
    def plot_data(self) -> dict[str, tuple[list[Any], list[float]]]:
        """Per storage, (value of `x_knob`, images/s) of every measured run, in the order they ran."""
        series: dict[str, tuple[list[Any], list[float]]] = {}
        for run in self.history:
            if run.images_per_s is None:
                continue
            xs, ys = series.setdefault(run.settings.storage, ([], []))
            xs.append(getattr(run.settings, self.x_knob))
            ys.append(run.images_per_s)
        return series

    def spreads(self) -> dict[str, tuple[list[float], list[float]]]:
        """Per storage, (slowest, fastest) measured pass of every run `plot_data` holds, in the same order: the
        noise a median hides."""
        series: dict[str, tuple[list[float], list[float]]] = {}
        for run in self.history:
            if run.images_per_s is None:
                continue
            lows, highs = series.setdefault(run.settings.storage, ([], []))
            lows.append(min(run.rates, default=run.images_per_s))
            highs.append(max(run.rates, default=run.images_per_s))
        return series

    def figure(self) -> Figure:
        """images/s against the knob changed last, one series per storage; each run's median with its passes'
        spread as an error bar."""
        fig = Figure(figsize=(6, 3), dpi=80)
        ax = fig.subplots()
        spreads = self.spreads()
        for storage, (xs, ys) in self.plot_data().items():
            xs_plot = [int(x) if isinstance(x, bool) else x for x in xs]
            lows, highs = spreads[storage]
            below = [y - low for y, low in zip(ys, lows)]
            above = [high - y for y, high in zip(ys, highs)]
            ax.errorbar(xs_plot, ys, yerr=[below, above], fmt="o", capsize=3, label=storage)
            ax.annotate(f"{ys[-1]:.0f}", (xs_plot[-1], ys[-1]), textcoords="offset points", xytext=(5, 5))
        ax.set_xlabel(
            self.x_knob + (" (0 = off, 1 = on)" if self.x_knob in ("pin_memory", "persistent_workers") else "")
        )
        numbers = [x for xs, _ in self.plot_data().values() for x in xs]
        if self.x_knob in ("num_workers", "prefetch_factor", "batch_size") and numbers:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlim(min(numbers) - 0.5, max(numbers) + 0.5)
        ax.set_ylabel("images/s")
        ax.set_title(f"Loader throughput against {self.x_knob} (every run; bars: slowest to fastest pass)")
        ax.legend(title="storage", fontsize="small")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        return fig

    def history_table(self) -> str:
        """Every run so far as text, one line each."""
        return "\n".join(f"{k:>2}. {run}" for k, run in enumerate(self.history, 1))

    def _on_click(self, _button: Any) -> None:
        self.button.disabled, self.button.description = True, "Running…"
        self.status.value = f"<i>measuring for up to {self.seconds:.0f} s…</i>"
        try:
            self.status.value = html.escape(str(self.run()))
        except Exception as e:  # a callback's exception would vanish into the log: show it
            self.status.value = f"<b style='color:#b00020'>{html.escape(type(e).__name__)}</b>: {html.escape(str(e))}"
        finally:
            self.button.disabled, self.button.description = False, "Run"

    def show(self) -> LoaderRun:
        """Display the panel (where there is a frontend), then run once with the controls' settings and print it.

        The printed findings and row are what a notebook run without widgets (nbconvert, nbval, a
        code host's viewer) keeps, and the panel's first point when there is one.
        """
        if _in_ipython():
            from IPython.display import display

            display(self.widget)
        blocking = [f for f in self.findings() if f.level != "ok"]
        print("\n".join(map(str, blocking)) or "labkit doctor: every check ok for these settings")
        record = self.run()
        print(record)
        return record


class SamplerPanel:
    """Block size and window of a `BlockShuffleSampler` → its randomness and locality scores and batches.

    ``labels``, ``offsets`` and ``lengths`` describe the data set as stored (a pack's index):
    the scores are `labkit.samplers.order_scores.score_order` of epoch 0's order.
    """

    def __init__(
        self,
        labels: Sequence[int],
        offsets: Sequence[int],
        lengths: Sequence[int],
        batch_size: int = 32,
        block_size: int = 16,
        window: int = 4,
        seed: int = 0,
        page_size: int = 1 << 20,
    ) -> None:
        self.labels, self.offsets, self.lengths = np.asarray(labels), np.asarray(offsets), np.asarray(lengths)
        self.batch_size, self.seed, self.page_size = batch_size, seed, page_size
        n = len(self.labels)
        sizes = sorted({min(2**k, n) for k in range(n.bit_length() + 1)} | {block_size})
        self.block_slider = w.SelectionSlider(
            options=sizes, value=block_size, description="block_size", continuous_update=False
        )
        self.window_slider = w.IntSlider(window, min=1, max=16, description="window", continuous_update=False)
        self.scores_html = w.HTML()
        self.plot_out = w.Output()
        self.order: list[int] = []
        self.scores: OrderScores | None = None
        self.block_slider.observe(self._on_change, names="value")
        self.window_slider.observe(self._on_change, names="value")
        self.widget = w.VBox([w.HBox([self.block_slider, self.window_slider]), self.scores_html, self.plot_out])
        self._compute()

    def _compute(self) -> OrderScores:
        sampler = BlockShuffleSampler(len(self.labels), self.block_slider.value, self.window_slider.value, self.seed)
        self.order = sampler.order(0)
        self.scores = score_order(self.order, self.labels, self.offsets, self.lengths, self.batch_size, self.page_size)
        self.scores_html.value = html.escape(self.describe())
        return self.scores

    def update(self, block_size: int | None = None, window: int | None = None) -> OrderScores:
        """Move the sliders (the callback they call), recompute the order, scores and plot."""
        if block_size is not None:
            if block_size not in self.block_slider.options:
                self.block_slider.options = sorted(set(self.block_slider.options) | {block_size})
            self.block_slider.value = block_size
        if window is not None:
            self.window_slider.value = window
        scores = self._compute()
        _show_figure(self.plot_out, self.figure())
        return scores

    def _on_change(self, change: dict[str, Any]) -> None:
        self._compute()
        _show_figure(self.plot_out, self.figure())

    def describe(self) -> str:
        s = self.scores
        return (
            f"block_size {self.block_slider.value}, window {self.window_slider.value}: class entropy per batch "
            f"{s.class_entropy:.2f} (1 = every batch as mixed as it can be), displacement {s.displacement:.2f} "
            f"(random ≈ 0.33), {s.pages_per_batch:.1f} pages of {self.page_size >> 20} MiB touched per batch"
        )

    def figure(self) -> Figure:
        """Left: the class of every sample in each batch. Right: where in the file each read lands."""
        fig = Figure(figsize=(9, 3), dpi=80)
        left, right = fig.subplots(1, 2)
        n_batches = len(self.order) // self.batch_size
        grid = self.labels[np.asarray(self.order[: n_batches * self.batch_size])].reshape(n_batches, self.batch_size)
        left.imshow(grid, aspect="auto", cmap="tab10", interpolation="nearest", vmin=0, vmax=9)
        left.set_xlabel("position in batch")
        left.set_ylabel("batch")
        left.set_title("class of each sample, batch by batch")
        positions = np.arange(len(self.order))
        right.scatter(
            positions,
            self.offsets[np.asarray(self.order)] / 2**20,
            s=4,
            c=self.labels[self.order],
            cmap="tab10",
            vmin=0,
            vmax=9,
        )
        right.set_xlabel("position in the epoch (samples)")
        right.set_ylabel("offset in the pack (MiB)")
        right.set_title("where each read lands")
        fig.suptitle(f"BlockShuffleSampler(block_size={self.block_slider.value}, window={self.window_slider.value})")
        fig.tight_layout()
        return fig

    def show(self) -> OrderScores:
        """Display the panel (where there is a frontend) and print the scores of its current settings."""
        if _in_ipython():
            from IPython.display import display

            display(self.widget)
            _show_figure(self.plot_out, self.figure())
        print(self.describe())
        return self.scores


class Checklist:
    """A checkbox per option, for picking which of several things to run (notebook 09: ablation versions).

    ``options`` are ``(id, label)`` pairs, shown in that order; ``unavailable`` maps an id to why it
    cannot be picked here (its box is greyed out with the reason). ``selected`` reads the ticked ids,
    so the cell after the list runs what the learner ticked; ``select`` sets them from code.
    """

    def __init__(
        self,
        options: Sequence[tuple[str, str]],
        selected: Sequence[str] = (),
        unavailable: dict[str, str] | None = None,
        description: str = "",
    ) -> None:
        self.unavailable = dict(unavailable or {})
        ids = [option for option, _ in options]
        unknown = (set(selected) | set(self.unavailable)) - set(ids)
        if unknown:
            raise LabkitValueError(f"{sorted(unknown)} not among the options {ids}")
        self.boxes: dict[str, w.Checkbox] = {
            option: w.Checkbox(
                False,
                description=f"{option}: {label}"
                + (f" ({self.unavailable[option]})" if option in self.unavailable else ""),
                disabled=option in self.unavailable,
                indent=False,
                layout=w.Layout(width="auto"),
            )
            for option, label in options
        }
        self.select(selected)
        self.widget = w.VBox(
            ([w.HTML(f"<b>{html.escape(description)}</b>")] if description else []) + list(self.boxes.values())
        )

    @property
    def selected(self) -> list[str]:
        """The ticked ids, in the options' order."""
        return [option for option, box in self.boxes.items() if box.value]

    def select(self, ids: Sequence[str]) -> list[str]:
        """Tick exactly ``ids``; an unknown id, or one unavailable here, is refused with the reason."""
        for option in ids:
            if option not in self.boxes:
                raise LabkitValueError(f"{option!r} is not an option; the options are {list(self.boxes)}")
            if option in self.unavailable:
                raise LabkitValueError(f"{option} cannot run here: {self.unavailable[option]}")
        for option, box in self.boxes.items():
            box.value = option in ids
        return self.selected

    def show(self) -> list[str]:
        """Display the boxes (where there is a frontend) and print what is ticked now."""
        if _in_ipython():
            from IPython.display import display

            display(self.widget)
        print("ticked: " + (", ".join(self.selected) or "nothing"))
        return self.selected
