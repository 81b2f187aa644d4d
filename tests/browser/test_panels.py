"""The notebooks' panels as learners use them: JupyterLab in a real Chromium, sliders moved with the
keyboard, buttons pressed; a unit test that calls the callbacks (tests/course/test_panel_callbacks.py) proves the
Python half only.

Each test fails on an error output in the notebook or an error in the browser's console, and
saves a screenshot of its panel after the change under tests/artifacts/. With
``LABKIT_README_IMAGES=docs/images`` the LoaderPanel test makes one more run and also writes the
README's picture of the panel there (a small PNG).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from browser_fixtures import artifacts, browser, chromium_path, lab, page  # noqa: F401 (fixtures)
from notebook_page import (
    open_notebook,
    output_with,
    plot_source,
    press_keys_on_slider,
    run_all_cells,
    slider,
    slider_value,
    wait_until,
)
from PIL import Image

# Generous waits, each named in its failure: the machine may be shared. Running notebook 04's cells
# is most of the time.
OPEN_S = 120.0
RUN_ALL_S = 300.0
PANEL_RUN_S = 120.0
UPDATE_S = 60.0
README_IMAGES_ENV = "LABKIT_README_IMAGES"
MAX_README_PNG = 200_000

pytestmark = pytest.mark.timeout(900)


def history_rows(panel) -> int:
    """Runs in the LoaderPanel's history table (its rows less the header)."""
    return max(0, panel.locator("table tr").count() - 1)


def loader_status(panel) -> str:
    """The text beside the Run button: the last run, or the exception its callback caught."""
    return (
        panel.locator(".widget-hbox")
        .filter(has=panel.page.locator("button.jupyter-button"))
        .locator(".widget-html-content")
        .inner_text()
    )


def run_with_another_worker_count(panel) -> str:
    """Move num_workers one step with the keyboard (right, or left at the slider's end), press Run,
    and wait for the new row in the history table and the new point on the plot."""
    rows, plot = history_rows(panel), plot_source(panel)
    workers = int(slider_value(panel, "num_workers"))
    top = int(float(slider(panel, "num_workers").locator(".noUi-handle").get_attribute("aria-valuemax")))
    key, target = ("ArrowRight", workers + 1) if workers < top else ("ArrowLeft", workers - 1)
    press_keys_on_slider(panel, "num_workers", key)
    wait_until(
        lambda: slider_value(panel, "num_workers") == str(target),
        UPDATE_S,
        f"the num_workers slider to move from {workers} to {target} on {key}",
    )
    panel.locator("button.jupyter-button", has_text="Run").click()
    wait_until(
        lambda: history_rows(panel) > rows or "Error" in loader_status(panel),
        PANEL_RUN_S,
        f"a row {rows + 1} in the history table after pressing Run",
    )
    assert history_rows(panel) == rows + 1, f"pressing Run did not add one row; the panel says: {loader_status(panel)}"
    row = panel.locator("table tr").last.locator("td").all_inner_texts()
    assert row[1] == str(target), f"the new row is not a run with the slider's {target} workers: {row}"
    wait_until(lambda: plot_source(panel) not in ("", plot), UPDATE_S, "the plot to be redrawn with the new point")
    status = wait_until(
        lambda: not loader_status(panel).startswith("measuring") and loader_status(panel),
        UPDATE_S,
        "the Run button's callback to report its run beside the button",
    )
    assert f"workers {target}," in status and "images/s" in status, f"the panel reports: {status}"
    return status


def save_png(panel, path: Path, max_bytes: int) -> None:
    """Screenshot of ``panel`` as a PNG of at most ``max_bytes`` (a 256-colour palette if need be)."""
    image = Image.open(io.BytesIO(panel.screenshot()))
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)
    if path.stat().st_size > max_bytes:
        image.convert("RGB").quantize(256).save(path, optimize=True)
    assert path.stat().st_size <= max_bytes, f"{path.name} is {path.stat().st_size} bytes, over {max_bytes}"


def test_loader_panel_runs_what_its_slider_says(lab, page, artifacts):
    notebook = "04_workers_pin_prefetch.ipynb"
    open_notebook(page, lab.notebook_url(notebook), notebook, OPEN_S)
    run_all_cells(page, RUN_ALL_S)
    panel = output_with(page, page.locator("button.jupyter-button", has_text="Run"))
    assert history_rows(panel) >= 1, "the LoaderPanel shows no run after the notebook ran (show() runs once)"
    run_with_another_worker_count(panel)
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(artifacts / "loader_panel.png"))

    readme_images = os.environ.get(README_IMAGES_ENV)
    if readme_images:
        run_with_another_worker_count(panel)
        save_png(panel, Path(readme_images) / "loader_panel.png", MAX_README_PNG)


def test_sampler_panel_rescores_when_block_size_moves(lab, page, artifacts):
    notebook = "02_sampler.ipynb"
    open_notebook(page, lab.notebook_url(notebook), notebook, OPEN_S)
    run_all_cells(page, RUN_ALL_S)
    panel = output_with(page, page.locator(".widget-slider", has_text="block_size"))
    scores = panel.locator(".widget-html-content", has_text="class entropy")
    before, plot = scores.inner_text(), plot_source(panel)
    block = int(slider_value(panel, "block_size"))
    assert before.startswith(f"block_size {block},"), f"the scores do not describe the slider's block size: {before}"
    press_keys_on_slider(panel, "block_size", "ArrowRight")
    moved = wait_until(
        lambda: slider_value(panel, "block_size") != str(block) and slider_value(panel, "block_size"),
        UPDATE_S,
        f"the block_size slider to move from {block} on ArrowRight",
    )
    assert int(moved) > block, f"ArrowRight moved block_size from {block} down to {moved}"
    after = wait_until(
        lambda: scores.inner_text() != before and scores.inner_text(),
        UPDATE_S,
        f"the scores to change after block_size moved to {moved}",
    )
    assert after.startswith(f"block_size {moved},"), f"the scores are not those of block_size {moved}: {after}"
    wait_until(lambda: plot_source(panel) not in ("", plot), UPDATE_S, "the sampler's plot to be redrawn")
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(artifacts / "sampler_panel.png"))
