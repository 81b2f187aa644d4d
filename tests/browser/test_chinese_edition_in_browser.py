"""The Chinese edition read in a real browser: JupyterLab in a headless Chromium opens notebooks 00 and 09 of
``notebooks/zh/`` and renders their Chinese headings, the glossary with every term's anchor, and the stored
outputs; a screenshot of each goes to tests/artifacts/. With ``LABKIT_README_IMAGES=docs/images`` it also writes
README.zh.md's picture there (which shows the Chinese only where a CJK font is installed, e.g. fonts-noto-cjk)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_fixtures import ROOT, START_S, artifacts, browser, chromium_path, page  # noqa: F401 (fixtures)
from labserver import JupyterLab
from notebook_page import open_notebook, scroll_to_cell
from test_panels import MAX_README_PNG, README_IMAGES_ENV, save_png

EDITION = ROOT / "notebooks" / "zh"
OPEN_S = 120.0
CJK = re.compile(r"[\u4e00-\u9fff]")

pytestmark = pytest.mark.timeout(600)

# True once the glossary row holding anchor ``id`` is on screen in the current notebook.
LANDED = """(id) => {
  const anchor = document.querySelector(`.jp-NotebookPanel:not(.lm-mod-hidden) [data-jupyter-id="${id}"]`);
  const row = anchor && anchor.closest('tr');
  if (!row) return false;
  const box = row.getBoundingClientRect();
  return box.height > 0 && box.top >= 0 && box.top < window.innerHeight;
}"""


@pytest.fixture(scope="module")
def zh_lab(chromium_path, tmp_path_factory) -> Iterator[JupyterLab]:
    """JupyterLab on copies of the Chinese edition's notebooks."""
    notebooks = sorted(EDITION.glob("*.ipynb"))
    with JupyterLab(tmp_path_factory.mktemp("jupyterlab-zh"), notebooks, start_timeout=START_S) as server:
        yield server


def test_notebook_00_shows_its_chinese_text_and_the_glossary_with_every_term(zh_lab, page, artifacts):
    notebook = "00_start_here.ipynb"
    open_notebook(page, zh_lab.notebook_url(notebook), notebook, OPEN_S)
    title = page.locator(".jp-Notebook .jp-MarkdownOutput h1").first.inner_text()
    assert title.startswith("00 ·") and CJK.search(title), f"the title is {title!r}"
    scroll_to_cell(page, "## 术语表")
    heading = page.locator(".jp-MarkdownOutput h2", has_text="术语表")
    assert heading.count() == 1 and heading.is_visible(), "the glossary's heading is not shown"
    glossary = page.locator(".jp-MarkdownOutput").filter(has=page.locator("h2", has_text="术语表"))
    terms = glossary.locator("a[data-jupyter-id^='g-']").count()  # JupyterLab keeps an anchor's id this way
    assert terms >= 50, f"the glossary shows {terms} terms"
    assert CJK.search(glossary.locator("tbody tr").first.inner_text()), "the glossary's first row has no Chinese"
    page.screenshot(path=str(artifacts / "zh_00_glossary.png"))

    # A term's link in a later notebook lands on its row of 00's glossary (00 open, as the course starts there;
    # JupyterLab drops a fragment while it is still opening a notebook).
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:open', {path: '01_dataset.ipynb'})")
    scroll_to_cell(page, "#g-page-cache")
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownOutput a[href*='#g-page-cache']").first.click()
    try:
        page.wait_for_function(LANDED, arg="g-page-cache", timeout=30_000, polling=500)
    except Exception as error:
        raise AssertionError(f"the link to g-page-cache did not bring its glossary row into view: {error}") from None


def test_notebook_09_shows_its_chinese_sections_beside_the_english_run_s_outputs(zh_lab, page, artifacts):
    notebook = "09_ablation.ipynb"
    open_notebook(page, zh_lab.notebook_url(notebook), notebook, OPEN_S)
    scroll_to_cell(page, "## 3.")
    section = page.locator(".jp-MarkdownOutput h2", has_text=re.compile(r"^3\. "))
    assert section.count() == 1 and CJK.search(section.inner_text()), "section 3's heading is not the Chinese one"
    assert page.locator(".jp-OutputArea-output img").count() >= 1, "the stored figure of the run is not shown"
    page.screenshot(path=str(artifacts / "zh_09_section3.png"))
    readme_images = os.environ.get(README_IMAGES_ENV)
    if readme_images:
        save_png(
            page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"),
            Path(readme_images) / "zh_notebook.png",
            MAX_README_PNG,
        )
    scroll_to_cell(page, "## 要点")
    assert page.locator(".jp-MarkdownOutput h2", has_text="要点").is_visible(), "the takeaways are not shown"
