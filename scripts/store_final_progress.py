#!/usr/bin/env python3
"""Store each progress bar of executed notebooks in its final state.

A tqdm bar in a notebook is a widget; its plain-text fallback, the only thing a page without widgets
shows (GitHub, nbviewer, JupyterLab before the kernel starts), is the bar as it was first drawn: 0%.
The notebook's saved widget state holds the final one. This rewrites each bar's text to that state.
``python scripts/store_final_progress.py notebooks/*.ipynb`` after executing them.
"""

from __future__ import annotations

import html
import json
import sys
from typing import Any


def final_text(model_id: str, states: dict[str, Any]) -> str | None:
    """The bar of the HBox ``model_id`` as tqdm's widgets last showed it, or None if it is not a tqdm bar."""
    box = states.get(model_id, {}).get("state", {})
    children = [c.replace("IPY_MODEL_", "") for c in box.get("children", [])]
    parts = [states.get(c, {}).get("state", {}) for c in children]
    if len(parts) != 3 or "max" not in parts[1]:
        return None
    left, bar, right = parts
    share = bar.get("value", 0) / bar["max"] if bar.get("max") else 0
    filled = int(round(10 * share))
    before, after = html.unescape(left.get("value", "")), html.unescape(right.get("value", ""))
    return f"{before}|{'█' * filled}{' ' * (10 - filled)}|{after}"


def fix(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    states = (
        nb.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    )
    changed = 0
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            text = final_text(view["model_id"], states) if view else None
            if text is not None and out["data"].get("text/plain") != [text]:
                out["data"]["text/plain"] = [text]  # nbformat's multi-line string: a list of lines
                changed += 1
    if changed:
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


if __name__ == "__main__":
    for name in sys.argv[1:]:
        count = fix(name)
        bars = "1 progress bar stored in its" if count == 1 else f"{count} progress bars stored in their"
        print(f"{name}: {bars} final state")
