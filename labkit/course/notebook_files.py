"""The course's notebooks as files: read one, a cell's source, and the text a notebook is committed as (one space
of indent, UTF-8 as is, a final newline), so that whatever writes a notebook (the student edition, a translated
edition) writes it the way the course's own notebooks are written."""

from __future__ import annotations

import json
from typing import Any


def read_notebook(path: str) -> dict[str, Any]:
    """The notebook at ``path`` (nbformat 4 as a dict)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cell_source(cell: dict[str, Any]) -> str:
    """A notebook cell's source as one string (nbformat stores a string or a list of lines)."""
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def notebook_text(notebook: dict[str, Any]) -> str:
    """``notebook`` as the course commits it."""
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
