"""The learner's builds: a module they write, the course's version in its place while theirs is a stub, and the
graded check that says which of the three it is (written and right, written and wrong, not written yet).

In the course's notebooks every "write it yourself" module is complete; in the student edition
(`labkit.course.student_edition`) its solution regions are stubs that raise ``NotImplementedError("not written
yet: <the task>")``. `learner_build` loads the learner's module as its file reads now and, while the file still
holds such a stub, says so and hands back the course's version instead, so a learner can stop at any build and
still run the notebook to its end. `check_build` is the graded check cell's last line: it passes, raises
`BuildCheckFailed` naming what was checked, or, for the course's version, prints "not written yet" — and raises
`BuildNotWritten` when an instructor grades (``LABKIT_GRADING=1``: nbgrader scores a cell that raises 0 points).
"""

from __future__ import annotations

import os
import re
from types import ModuleType

from labkit.core.atomic import write_atomic
from labkit.core.environment import clone_root
from labkit.core.errors import LabkitError, LabkitFileNotFoundError
from labkit.course.learner_modules import learner_folder, load_learner_module, written_by

#: The words every stub's NotImplementedError starts with: how a module still holding one is told apart.
STUB = "not written yet"
#: Where the student edition keeps the course's version of each build, beside its notebooks.
REFERENCE_FOLDER = "reference"
_STUB_LINE = re.compile(r"""raise NotImplementedError\(\s*["']not written yet: ?(.*?)["']\s*\)""")
_REFERENCE = "__labkit_reference__"


class BuildCheckFailed(LabkitError, AssertionError):
    """The learner's build was checked and is not right yet; the message names the check, not the answer."""


class BuildNotWritten(LabkitError, NotImplementedError):
    """Under ``LABKIT_GRADING=1``: the build is still the student edition's stub, so its check scores nothing."""


def grading() -> bool:
    """True while an instructor grades (``LABKIT_GRADING=1``): a build not written is then a failed check."""
    return os.environ.get("LABKIT_GRADING", "") not in ("", "0")


def stubs_left(source: str) -> list[str]:
    """The tasks of the stubs ``source`` still holds, in order (empty when every part is written)."""
    return [m.group(1) for m in _STUB_LINE.finditer(source)]


def is_reference(module: ModuleType) -> bool:
    """True for the course's version that `learner_build` handed back in place of a stub."""
    return bool(getattr(module, _REFERENCE, False))


def _reference_source(notebook: str, name: str) -> str:
    """The course's ``name``: ``reference/<name>.py`` beside the running notebook (the student edition writes it
    there), else the ``%%writefile`` cell of the clone's complete notebook."""
    beside = os.path.join(os.getcwd(), REFERENCE_FOLDER, f"{name}.py")
    if os.path.exists(beside):
        with open(beside, encoding="utf-8") as f:
            return f.read()
    root = clone_root()
    if root is None:
        raise LabkitFileNotFoundError(
            f"{name}.py still holds stubs and the course's version is not here: no {beside}, and labkit does not run "
            "from a clone with notebooks/. Finish the stubs, or make the student edition again (labkit course "
            "--student DIR), which writes the course's versions to DIR/reference/"
        )
    return written_by(notebook, os.path.join(root, "notebooks", f"{notebook}.ipynb"), name)


def learner_build(notebook: str, name: str) -> ModuleType:
    """The learner's module ``name`` of ``notebook`` (``"04_workers_pin_prefetch"``, ``"lab04_pool"``) as its file
    reads now; while the file still holds a stub of the student edition, the course's version, after a line that
    says which parts are not written yet (`is_reference` tells it apart)."""
    folder = learner_folder(notebook[:2])
    path = os.path.join(folder, f"{name}.py")
    with open(path, encoding="utf-8") as f:
        left = stubs_left(f.read())
    if not left:
        return load_learner_module(name)
    reference = f"{name}_reference"
    write_atomic(os.path.join(folder, f"{reference}.py"), _reference_source(notebook, name).encode("utf-8"))
    module = load_learner_module(reference)
    setattr(module, _REFERENCE, True)
    print(
        f"{name}.py: not written yet ({'; '.join(left)}). The cells below run the course's version in its place, "
        "so their results are the course's, not yours: fill in the stubs and run them again."
    )
    return module


def learner_piece(notebook: str, name: str) -> ModuleType:
    """The learner's module ``name`` from an earlier notebook (``"01_dataset"``), as they last wrote it there (see
    `learner_build`); where that notebook has not run yet, its own ``%%writefile`` cell (of the notebook beside the
    running one, so the student edition's stubs) is written for it first, so a later lab that builds on the piece
    runs on its own."""
    path = os.path.join(learner_folder(notebook[:2]), f"{name}.py")
    if not os.path.exists(path):
        beside = os.path.join(os.getcwd(), f"{notebook}.ipynb")  # this edition's notebook: the student's has stubs
        source = (
            beside
            if os.path.exists(beside)
            else os.path.join(clone_root() or os.getcwd(), "notebooks", f"{notebook}.ipynb")
        )
        write_atomic(path, written_by(notebook, source, name).encode("utf-8"))
    return learner_build(notebook, name)


def check_build(passed: bool, what: str, module: ModuleType | None = None, why: str = "") -> None:
    """The graded check of a build: "passed" when ``passed``; `BuildCheckFailed` naming ``what`` (and ``why``)
    when not; for the course's version in place of the learner's (``module``, see `learner_build`), "not written
    yet" — or `BuildNotWritten` while grading, so the build scores nothing."""
    if module is not None and is_reference(module):
        if grading():
            raise BuildNotWritten(f"check ({what}): the build is still the student edition's stub")
        print(f"Check ({what}): not written yet, so nothing of yours was checked; the course's version ran instead.")
        return
    if not passed:
        raise BuildCheckFailed(
            f"check ({what}): not yet" + (f": {why}" if why else "") + ". Edit your module and run "
            "the cells from its %%writefile cell again."
        )
    print(f"Check ({what}): passed.")
