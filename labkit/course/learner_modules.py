"""Where a notebook's "write it yourself" code lives: a module of the learner's, not a notebook cell.

A DataLoader worker started with spawn (macOS, Windows) or forkserver (Linux from Python 3.14) is a fresh
interpreter: it unpickles the dataset by importing the module its class is defined in, and a class defined in a
notebook cell has no module it can import. So each notebook writes the learner's version with ``%%writefile`` into
a folder of its own under the data folder (never into ``notebooks/``, which stays as cloned), puts that folder on
``sys.path`` (which spawned workers inherit), and imports it from there.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from types import ModuleType

from labkit.core.atomic import write_atomic
from labkit.core.environment import clone_root
from labkit.core.errors import LabkitFileNotFoundError, LabkitValueError
from labkit.harness.workspace import data_root


def learner_folder(lab: str) -> str:
    """``<data folder>/learner/<lab>``, made if missing and first on ``sys.path``: where notebook ``lab`` (e.g.
    ``"06"``) writes the learner's modules."""
    if not lab or os.sep in lab or (os.altsep and os.altsep in lab) or lab in (".", ".."):
        raise LabkitValueError(f"lab={lab!r}: a plain name such as '06', without path separators")
    folder = os.path.join(data_root(), "learner", lab)
    os.makedirs(folder, exist_ok=True)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return folder


def _written_by(notebook: str, path: str, name: str) -> str:
    """The source the ``%%writefile {LAB}/<name>.py`` cell of ``notebook`` writes; a missing notebook or cell is an
    error saying to run that notebook."""
    marker = f"%%writefile {{LAB}}/{name}.py"
    try:
        with open(path, encoding="utf-8") as f:
            cells = json.load(f)["cells"]
    except OSError:
        cells = []
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith(marker):
            return source[len(marker) :].lstrip("\n")
    raise LabkitFileNotFoundError(
        f"{name}.py is not in {learner_folder(notebook[:2])} and {path} has no cell that writes "
        f"it: run notebook {notebook} first, which writes your version of it"
    )


def learner_piece(notebook: str, name: str) -> ModuleType:
    """The learner's module ``name`` from an earlier notebook (``"01_dataset"``), as they last wrote it there; where
    that notebook has not run yet, its own ``%%writefile`` cell is written for it first, so a later lab that builds
    on the piece runs on its own."""
    folder = learner_folder(notebook[:2])
    path = os.path.join(folder, f"{name}.py")
    if not os.path.exists(path):
        root = clone_root() or os.getcwd()
        write_atomic(
            path, _written_by(notebook, os.path.join(root, "notebooks", f"{notebook}.ipynb"), name).encode("utf-8")
        )
    return load_learner_module(name)


def load_learner_module(name: str) -> ModuleType:
    """The module ``name`` as its file reads now: imported the first time, reloaded after every edit (a cell
    re-run after ``%%writefile`` gets the new code, in the notebook and in workers started after it)."""
    importlib.invalidate_caches()
    module = sys.modules.get(name)
    if module is None:
        return importlib.import_module(name)
    return importlib.reload(module)
