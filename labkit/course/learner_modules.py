"""Where a notebook's "write it yourself" code lives: a module of the learner's, not a notebook cell.

A DataLoader worker started with spawn (macOS, Windows) or forkserver (Linux from Python 3.14) is a fresh
interpreter: it unpickles the dataset by importing the module its class is defined in, and a class defined in a
notebook cell has no module it can import. So each notebook writes the learner's version with ``%%writefile`` into
a folder of its own under the data folder (never into ``notebooks/``, which stays as cloned), puts that folder on
``sys.path`` (which spawned workers inherit), and imports it from there.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from types import ModuleType

from labkit.core.errors import LabkitFileNotFoundError, LabkitValueError
from labkit.course.notebook_files import cell_source, read_notebook
from labkit.harness.workspace import data_root

#: The edition whose learner modules this kernel keeps: "" for the course's complete notebooks.
_edition = {"name": ""}


def use_edition(name: str) -> None:
    """Keep this kernel's learner modules under ``<data folder>/learner/<name>/`` (the student edition's first
    cell calls ``use_edition("student")``), apart from the ones the complete notebooks write: running a complete
    notebook never overwrites what a learner wrote in the student edition."""
    if name and (os.sep in name or (os.altsep and os.altsep in name) or name in (".", "..")):
        raise LabkitValueError(f"edition {name!r}: a plain name such as 'student', without path separators")
    _edition["name"] = name


def learner_folder(lab: str) -> str:
    """``<data folder>/learner/<lab>`` (``learner/<edition>/<lab>`` after `use_edition`), made if missing and first
    on ``sys.path``: where notebook ``lab`` (e.g. ``"06"``) writes the learner's modules."""
    if not lab or os.sep in lab or (os.altsep and os.altsep in lab) or lab in (".", ".."):
        raise LabkitValueError(f"lab={lab!r}: a plain name such as '06', without path separators")
    folder = os.path.join(data_root(), "learner", *([_edition["name"]] if _edition["name"] else []), lab)
    os.makedirs(folder, exist_ok=True)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return folder


#: The first line of a cell that writes a learner's module; with ``-a`` it appends a further step to the module
#: the cells before it wrote, so a long build is written (and read) in steps.
WRITEFILE = re.compile(r"%%writefile(?P<append> -a)? \{LAB\}/(?P<name>\w+)\.py[ \t]*(?:\n|$)")


def module_parts(cells: list[dict], name: str) -> list[str]:
    """The bodies of the code cells (nbformat dicts) that write module ``name``, in order: the one that writes it,
    then those that append to it (``%%writefile -a``)."""
    parts = []
    for cell in cells:
        source = cell_source(cell)
        found = WRITEFILE.match(source) if cell["cell_type"] == "code" else None
        if found and found.group("name") == name:
            if not found.group("append"):
                parts = []
            parts.append(source[found.end() :])
    return parts


def joined_parts(parts: list[str]) -> str:
    """The file the cells of `module_parts` leave behind: each cell's text as IPython writes it, a newline after
    each."""
    return "".join(part if part.endswith("\n") else part + "\n" for part in parts)


def written_by(notebook: str, path: str, name: str) -> str:
    """The source the ``%%writefile {LAB}/<name>.py`` cells of ``notebook`` write; a missing notebook or cell is an
    error saying to run that notebook."""
    try:
        cells = read_notebook(path)["cells"]
    except OSError:
        cells = []
    parts = module_parts(cells, name)
    if parts:
        return joined_parts(parts)
    raise LabkitFileNotFoundError(
        f"{name}.py is not in {learner_folder(notebook[:2])} and {path} has no cell that writes "
        f"it: run notebook {notebook} first, which writes your version of it"
    )


def load_learner_module(name: str) -> ModuleType:
    """The module ``name`` as its file reads now: imported the first time, reloaded after every edit (a cell
    re-run after ``%%writefile`` gets the new code, in the notebook and in workers started after it)."""
    importlib.invalidate_caches()
    module = sys.modules.get(name)
    if module is None:
        return importlib.import_module(name)
    return importlib.reload(module)
