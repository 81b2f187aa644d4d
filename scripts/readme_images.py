"""Make the README's pictures in docs/images/: none of them is drawn by hand.

- ``ablation.png``: each ablation version's speed-up over v1, from the reports in benchmarks/results/
  (`labkit.harness.ablation_report`);
- ``sampler_tradeoff.png``: randomness against locality of the sampler orders on the course's quick
  data set (`labkit.samplers.order_scores`, as in notebook 02);
- ``loader_panel.png``: the LoaderPanel of notebook 04 after a few runs, screenshotted in JupyterLab
  by the browser test (tests/browser), which needs a Chromium;
- ``zh_notebook.png``: section 3 of the Chinese edition's notebook 09 in JupyterLab, by the browser test of the
  Chinese edition (it needs a CJK font too, e.g. Debian's fonts-noto-cjk, or the Chinese shows as boxes).

Usage: ``.venv/bin/python scripts/readme_images.py [--skip-browser]``. Each PNG stays under 200 KB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from labkit.harness.ablation_report import plot_speedups, reference_runs, results_folder  # noqa: E402
from labkit.harness.workspace import course_workspace  # noqa: E402
from labkit.measure.block_size_sweep import plot_tradeoff, sweep_block_sizes  # noqa: E402
from labkit.storage.pack_format import PackReader  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGES = os.path.join("docs", "images")
MAX_BYTES = 200_000
BATCH, PAGE = 32, 1 << 20  # notebook 02's batch and page


def _save(fig, name: str) -> str:
    path = os.path.join(ROOT, IMAGES, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return _checked(path)


def _checked(path: str) -> str:
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise SystemExit(
            f"{os.path.relpath(path, ROOT)} is {size} bytes, over the README's {MAX_BYTES}: make the figure smaller"
        )
    print(f"wrote {os.path.relpath(path, ROOT)} ({size // 1024} KB)")
    return path


def ablation_chart() -> str:
    runs = reference_runs()
    if not runs:
        raise SystemExit(
            f"no ablation_*.json in {results_folder() or 'benchmarks/results'}: run labkit ablation --json"
        )
    fig, ax = plt.subplots(figsize=(8, 3.4))
    plot_speedups(runs, ax=ax)
    ax.set_title("The ablation: each version's images/s over v1 (benchmarks/results)", fontsize=10)
    return _save(fig, "ablation.png")


def sampler_tradeoff_chart() -> str:
    pack = PackReader(course_workspace(quick=True, progress=False).pack)
    tradeoff = sweep_block_sizes(pack.labels, pack.records["offset"], pack.records["length"], BATCH, PAGE)
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    plot_tradeoff(tradeoff, ax=ax)
    return _save(fig, "sampler_tradeoff.png")


def browser_screenshot(name: str, test: str, what: str) -> str:
    """``docs/images/<name>``, written by the browser ``test`` (tests/browser) when LABKIT_README_IMAGES says where."""
    env = {**os.environ, "LABKIT_README_IMAGES": os.path.join(ROOT, IMAGES), "LABKIT_QUICK": "1"}
    path = os.path.join(ROOT, IMAGES, name)
    if os.path.exists(path):
        os.remove(path)  # a skipped test must not leave an old picture looking new
    done = subprocess.run(
        [sys.executable, "-m", "pytest", test, "-q", "-rs", "-p", "no:cacheprovider"], cwd=ROOT, env=env
    )
    if done.returncode != 0 or not os.path.exists(path):
        raise SystemExit(f"the browser test failed or was skipped (exit {done.returncode}): no screenshot of {what}")
    return _checked(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skip-browser",
        action="store_true",
        help="leave the screenshots (loader_panel.png, zh_notebook.png) as they are",
    )
    args = parser.parse_args()
    ablation_chart()
    sampler_tradeoff_chart()
    if not args.skip_browser:
        browser_screenshot(
            "loader_panel.png",
            "tests/browser/test_panels.py::test_loader_panel_runs_what_its_slider_says",
            "the LoaderPanel",
        )
        browser_screenshot(
            "zh_notebook.png",
            "tests/browser/test_chinese_edition_in_browser.py::"
            "test_notebook_09_shows_its_chinese_sections_beside_the_english_run_s_outputs",
            "the Chinese edition's notebook 09",
        )


if __name__ == "__main__":
    main()
