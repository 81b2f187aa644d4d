"""Reading ablation reports: the committed reference runs beside a learner's own, and what each version changed.

An ablation report is what `labkit.harness.ablation.run_ablation` returns and writes as JSON
(``labkit ablation --json``); the clone keeps reference runs in ``benchmarks/results/ablation_*.json``.
Absolute speeds do not compare across machines — a 2-core laptop, a course server and a GPU box
differ by an order of magnitude before any knob moves — so runs are set side by side as speed-ups
over each run's own v1. A run committed later (a GPU machine's) shows up without any change here.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.core.environment import clone_root
from labkit.core.errors import LabkitValueError
from labkit.core.plotting import pyplot

BASELINE = "v1"


@dataclass(frozen=True)
class AblationRun:
    """One ablation run: where it ran, and the images/s of each version it measured."""

    name: str  # the report's file name without .json, or what the caller calls it ("this machine")
    machine: str  # its CPUs and device, in a few words
    device: str  # "cpu", "cuda", ...
    model: bool  # measured with a model step (``--model``)
    images_per_s: dict[str, float]

    @classmethod
    def from_report(cls, name: str, report: Mapping[str, Any]) -> AblationRun:
        settings = report.get("settings", {})
        info = report.get("machine", {})
        device = str(settings.get("device") or info.get("device", "?"))
        gpu = info.get("device", "cpu")
        machine = f"{info.get('cpu_count', '?')} CPUs, " + ("CPU only" if gpu == "cpu" else gpu)
        return cls(
            name,
            machine,
            device,
            bool(settings.get("model")),
            {v["id"]: float(v["images_per_s"]) for v in report.get("versions", [])},
        )

    @property
    def speedups(self) -> dict[str, float]:
        """images/s of each version over this run's own v1 (empty when the run has no v1)."""
        base = self.images_per_s.get(BASELINE)
        return {vid: rate / base for vid, rate in self.images_per_s.items()} if base else {}

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def label(self) -> str:
        return f"{self.name}: {self.machine}" + (", model step" if self.model else "")


def results_folder() -> str | None:
    """``benchmarks/results`` of the clone labkit runs from (found from the package's location), or None."""
    clone = clone_root()
    folder = os.path.join(clone, "benchmarks", "results") if clone is not None else None
    return folder if folder is not None and os.path.isdir(folder) else None


def reference_runs(folder: str | None = None, pattern: str = "ablation_*.json") -> list[AblationRun]:
    """Every ablation report in ``folder`` (default `results_folder`) matching ``pattern``, sorted by name."""
    folder = folder or results_folder()
    if folder is None:
        return []
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, pattern))):
        with open(path, encoding="utf-8") as f:
            try:
                report = json.load(f)
            except json.JSONDecodeError as e:
                raise LabkitValueError(
                    f"{os.path.basename(path)} is not an ablation report (invalid JSON: {e}); "
                    "rewrite it with labkit ablation --json"
                ) from None
        if not isinstance(report, dict) or "versions" not in report:
            raise LabkitValueError(
                f"{os.path.basename(path)} has no 'versions': not an ablation report "
                "(labkit ablation --json writes one)"
            )
        runs.append(AblationRun.from_report(os.path.splitext(os.path.basename(path))[0], report))
    return runs


def changed_knobs(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """For each version of ``report``, the loader settings it sets differently from v1 (``name: value``):
    the moving parts it adds. Empty lists when the report has no v1."""
    loaders = {v["id"]: v.get("loader", {}) for v in report.get("versions", [])}
    base = loaders.get(BASELINE)
    if base is None:
        return {vid: [] for vid in loaders}
    return {vid: [f"{k}: {v}" for k, v in loader.items() if base.get(k) != v] for vid, loader in loaders.items()}


def plot_speedups(runs: Sequence[AblationRun], ax: Any = None, versions: Sequence[str] | None = None) -> Any:
    """Grouped bars: each version's speed-up over its run's own v1, one series per run, on an axis from 0 (the
    course's rule for throughput), each bar labelled with its factor so the small ones read beside a 20x.

    A version a run did not measure leaves a gap; a run without v1 is left out (nothing to divide by).
    """
    plt = pyplot()
    usable = [r for r in runs if r.speedups]
    ids = list(versions) if versions else sorted({vid for r in usable for vid in r.speedups}, key=lambda v: (len(v), v))
    ax = ax or plt.subplots(figsize=(9, 3.6), dpi=80)[1]
    width = 0.8 / max(1, len(usable))
    for k, run in enumerate(usable):
        xs = [i + (k - (len(usable) - 1) / 2) * width for i, vid in enumerate(ids) if vid in run.speedups]
        ys = [run.speedups[vid] for vid in ids if vid in run.speedups]
        bars = ax.bar(xs, ys, width=width, label=run.label, hatch="//" if run.on_gpu else None)
        ax.bar_label(bars, labels=[f"{y:.1f}" for y in ys], fontsize=6, padding=1)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(ids)), ids)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("version")
    ax.set_ylabel("images/s over the run's own v1 (x)")
    ax.legend(fontsize="small")
    return ax
