"""What a learner does in JupyterLab, as Playwright steps: open a notebook, run all its cells, find a
panel, move a slider with the keyboard, press a button, and the checks that nothing went wrong.

Cell states and outputs are read from JupyterLab's own model (``window.jupyterapp``, exposed by
the server's ``--expose-app-in-browser``), not guessed from the page's text.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from playwright.sync_api import Locator, Page

_STATE = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model || !panel.sessionContext) return null;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  const cells = [];
  const model = panel.content.model;
  for (let i = 0; i < model.cells.length; i++) {
    const cell = model.cells.get(i);
    if (cell.type !== 'code') continue;
    const errors = [];
    for (let j = 0; j < cell.outputs.length; j++) {
      const out = cell.outputs.get(j).toJSON();
      if (out.output_type === 'error') errors.push(out.ename + ': ' + out.evalue);
    }
    cells.push({index: i, count: cell.executionCount, errors: errors});
  }
  return {path: panel.context.path, kernel: kernel ? kernel.status : null,
          connection: kernel ? kernel.connectionStatus : null, cells: cells};
}"""


def notebook_state(page: Page) -> dict[str, Any]:
    """The current notebook's path, its kernel status and, per code cell, its execution count and error outputs."""
    return page.evaluate(_STATE)


def open_notebook(page: Page, url: str, notebook: str, timeout: float) -> None:
    """Open ``url`` and wait until ``notebook`` is the current tab and its kernel is connected and idle.

    The path is checked, not only the kernel: a JupyterLab workspace reopens the notebooks of an
    earlier visit, and one of those, its kernel already idle, can be the current tab for a moment."""
    page.goto(url)
    try:
        page.wait_for_function(
            f"() => {{ const s = ({_STATE})(); "
            f"return s && s.path === {json.dumps(notebook)} && s.connection === 'connected' "
            "&& s.kernel === 'idle'; }",
            timeout=timeout * 1000,
            polling=500,
        )
    except Exception as e:
        raise AssertionError(
            f"{notebook} was not the current tab with its kernel connected and idle within "
            f"{timeout:.0f} s after opening {url.split('?')[0]}: {notebook_state(page)}"
        ) from e


def run_all_cells(page: Page, timeout: float) -> None:
    """Run > Run All Cells from the menu bar, then wait until every code cell has run (or one failed)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    started = time.monotonic()
    while True:
        state = notebook_state(page)
        failed = [c for c in state["cells"] if c["errors"]]
        done = all(c["count"] is not None for c in state["cells"])
        if state["kernel"] == "idle" and (done or failed):
            break
        if time.monotonic() - started > timeout:
            waiting = [c["index"] for c in state["cells"] if c["count"] is None]
            raise AssertionError(
                f"Run All Cells had not finished after {timeout:.0f} s (kernel {state['kernel']}, "
                f"cells still to run: {waiting}); the machine may be overloaded"
            )
        time.sleep(1.0)
    assert_no_error_outputs(page)


def assert_no_error_outputs(page: Page) -> None:
    errors = [f"cell {c['index']}: {e}" for c in notebook_state(page)["cells"] for e in c["errors"]]
    assert not errors, "the notebook has error outputs:\n" + "\n".join(errors)


def output_with(page: Page, inner: Locator, timeout: float = 180.0) -> Locator:
    """The one cell output that contains ``inner`` (a panel is found by a control it alone has).

    The notebook is scrolled a screen at a time while it looks, as a person would: JupyterLab may
    render only the cells near the view."""
    found = page.locator(".jp-OutputArea-output").filter(has=inner)
    started = time.monotonic()
    while not (found.count() and found.first.is_visible()):
        if time.monotonic() - started > timeout:
            raise AssertionError(
                f"no visible output holding {inner} after {timeout:.0f} s of scrolling the notebook; "
                f"its state: {notebook_state(page)}"
            )
        page.evaluate(_SCROLL_DOWN)
        time.sleep(0.5)
    assert found.count() == 1, f"expected one output holding {inner}, found {found.count()}"
    found.first.scroll_into_view_if_needed()
    return found.first


_SCROLL_TO_CELL = """async (text) => {
  const notebook = window.jupyterapp.shell.currentWidget.content;
  const cells = notebook.model.cells;
  for (let i = 0; i < cells.length; i++) {
    if (cells.get(i).sharedModel.getSource().includes(text)) { await notebook.scrollToItem(i, 'start'); return i; }
  }
  return -1;
}"""


def scroll_to_cell(page: Page, text: str) -> int:
    """Scroll the open notebook to the first cell whose source holds ``text`` (JupyterLab renders the cells near
    the view only), and return its index."""
    index = page.evaluate(_SCROLL_TO_CELL, text)
    assert index >= 0, f"no cell of {notebook_state(page)['path']} holds {text!r}"
    time.sleep(1.0)
    return index


# Scroll the open notebook down by most of a screen, back to the top after its end.
_SCROLL_DOWN = """() => {
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer')
             || document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
  if (!panel) return;
  const end = panel.scrollTop + panel.clientHeight >= panel.scrollHeight - 2;
  panel.scrollTop = end ? 0 : panel.scrollTop + 0.8 * panel.clientHeight;
}"""


def slider(panel: Locator, name: str) -> Locator:
    """The ipywidgets slider labelled ``name`` in ``panel``."""
    return panel.locator(".widget-slider").filter(
        has=panel.page.locator(".widget-label", has_text=re.compile(f"^{re.escape(name)}$"))
    )


def slider_value(panel: Locator, name: str) -> str:
    return slider(panel, name).locator(".widget-readout").inner_text().strip()


def press_keys_on_slider(panel: Locator, name: str, key: str, times: int = 1) -> None:
    """Focus the slider's handle, as a Tab would, and press ``key``: the keyboard path a person takes."""
    handle = slider(panel, name).locator(".noUi-handle")
    handle.focus()
    for _ in range(times):
        handle.press(key)


def plot_source(panel: Locator) -> str:
    """The ``src`` of the plot image in ``panel`` (a data URL: it changes when the plot is redrawn)."""
    images = panel.locator(".widget-output img")
    return images.first.get_attribute("src") if images.count() else ""


def wait_until(check, timeout: float, what: str, poll: float = 0.5) -> Any:
    """Poll ``check()`` until it returns something true; fail after ``timeout`` s saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}; it did not happen")
        time.sleep(poll)
