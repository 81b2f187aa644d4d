"""Fixtures of the browser tests: a JupyterLab server, a headless Chromium, and a page that records
every error the browser reports. (Not a conftest.py: the unit tests import names from
tests/conftest.py as ``conftest``, which a second conftest module would shadow.)

They need a Chromium (Debian's ``chromium`` package, or ``LABKIT_CHROMIUM`` naming one): Playwright
drives it through ``executable_path`` instead of downloading its own browser. Without one the
tests are skipped and the summary says why.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from labserver import JupyterLab
from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Generous: the machine may be shared. An idle 2-core machine needs far less.
START_S = 180.0


def find_chromium() -> str | None:
    """``LABKIT_CHROMIUM`` if set, else the first Chromium on PATH."""
    configured = os.environ.get("LABKIT_CHROMIUM")
    if configured:
        return configured
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


# Module scope, not session: the server and the browser stop as soon as the browser tests end, instead of
# idling beside the unit tests and notebooks that follow (and meeting their load) until the session ends.
@pytest.fixture(scope="module")
def chromium_path() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip(
            "no Chromium found (apt-get install chromium, or set LABKIT_CHROMIUM): "
            "the browser test of the panels did not run"
        )
    return path


@pytest.fixture(scope="module")
def lab(chromium_path, tmp_path_factory) -> Iterator[JupyterLab]:
    """JupyterLab on copies of the course's notebooks, in quick mode."""
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    with JupyterLab(
        tmp_path_factory.mktemp("jupyterlab"), notebooks, env={"LABKIT_QUICK": "1"}, start_timeout=START_S
    ) as server:
        yield server


@pytest.fixture(scope="module")
def browser(chromium_path) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture()
def page(browser) -> Iterator[Page]:
    """A fresh page; the test fails if the browser reported any error while it ran."""
    context = browser.new_context(viewport={"width": 1400, "height": 2400})
    page = context.new_page()
    page.set_default_timeout(START_S * 1000)
    errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            errors.append(f"console error: {message.text} ({message.location})") if message.type == "error" else None
        ),
    )
    page.on("pageerror", lambda error: errors.append(f"uncaught error: {error}"))
    try:
        yield page
        reported = list(errors)  # while the test ran; closing the page is not part of it
    finally:
        context.close()
    assert not reported, "the browser reported errors:\n" + "\n".join(reported)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where the screenshots go (git-ignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
