"""The student edition of the course: every build a stub for the learner to write, every check graded.

The course's notebooks are nbgrader source notebooks. A "write it yourself" cell is a solution cell (cell metadata
``nbgrader.solution``) whose ``%%writefile`` module marks each part the learner writes::

    def worker_loop(dataset, collate_fn, index_queue, data_queue):
        \"\"\"One worker: ...\"\"\"
        ### BEGIN SOLUTION: take (batch number, indices) from the index queue until None, put (number, batch) back
        ...
        ### END SOLUTION

and a check cell (``nbgrader.grade`` with ``points``) ends with `labkit.course.builds.check_build`. An exercise's
answer is a solution cell of its own (``ANSWER_3 = None``), checked by the graded cell after it.

`write_student_edition` makes the edition: each region becomes ``raise NotImplementedError("not written yet:
<task>")`` (nbgrader's own ``generate_assignment`` reads the same markers, and gives its own stub), the collapsed
solutions of the exercises are left out, every output is cleared, and the course's version of each build goes to
``reference/`` so that `labkit.course.builds.learner_build` can run it in place of a stub: a learner can stop at any
build and still finish the notebook.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from labkit.core.atomic import write_atomic
from labkit.core.errors import LabkitFileExistsError, LabkitValueError
from labkit.course.builds import REFERENCE_FOLDER, STUB
from labkit.course.learner_modules import WRITEFILE, joined_parts, module_parts
from labkit.course.notebook_files import cell_source, notebook_text, read_notebook

BEGIN = "BEGIN SOLUTION"
END = "END SOLUTION"
#: The opening words of an exercise's collapsed solution (code, or markdown), which the student edition leaves out.
SOLUTION_CELLS = ("# Solution to exercise", "**Solution to exercise")
#: Put before the first code cell's own lines: the edition's learner modules live apart from the course's.
EDITION_LINES = (
    "from labkit.course.learner_modules import use_edition\n"
    'use_edition("student")  # your modules go to data/learner/student/, apart from the complete notebooks\' ones\n'
)
#: What marks a folder as a student edition this module wrote (so writing it again may replace it).
MARK = ".labkit-student-edition"


def nbgrader_meta(cell: dict[str, Any]) -> dict[str, Any]:
    """The cell's nbgrader metadata (empty when it has none)."""
    return cell.get("metadata", {}).get("nbgrader", {})


def stub_solutions(source: str, where: str) -> str:
    """``source`` with each ``### BEGIN SOLUTION: <task>`` … ``### END SOLUTION`` region replaced by a line that
    raises ``NotImplementedError("not written yet: <task>")``, indented as the BEGIN line. ``where`` names the cell
    in the errors (a region not closed, nested, or without its task)."""
    out: list[str] = []
    task: str | None = None
    for number, line in enumerate(source.split("\n"), 1):
        if BEGIN in line:
            if task is not None:
                raise LabkitValueError(f"{where}, line {number}: a {BEGIN} inside another; close the first with {END}")
            task = line.split(BEGIN, 1)[1].lstrip(" :—-").strip()
            if not task:
                raise LabkitValueError(
                    f"{where}, line {number}: {BEGIN} without its task; write it after a colon "
                    f"('### {BEGIN}: return the batch as one tensor'), the stub's one sentence"
                )
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}raise NotImplementedError({json.dumps(f'{STUB}: {task}', ensure_ascii=False)})")
        elif END in line:
            if task is None:
                raise LabkitValueError(f"{where}, line {number}: {END} without a {BEGIN} before it")
            task = None
        elif task is None:
            out.append(line)
    if task is not None:
        raise LabkitValueError(f"{where}: the region '{task}' has no {END}")
    return "\n".join(out)


def strip_markers(source: str) -> str:
    """``source`` without its BEGIN/END SOLUTION lines: the course's version of a build, as a module."""
    return "\n".join(line for line in source.split("\n") if BEGIN not in line and END not in line)


@dataclass
class StudentNotebook:
    """One notebook's student edition, and the course's version of each build it asks for."""

    notebook: dict[str, Any]
    references: dict[str, str] = field(default_factory=dict)  # module name -> its source, markers removed
    stubs: int = 0  # regions made stubs
    graded: int = 0  # graded check cells
    points: float = 0.0


def solution_cells(notebook: dict[str, Any]) -> set[str]:
    """The ids of ``notebook``'s collapsed exercise solutions (the cells that open with `SOLUTION_CELLS`' words)."""
    return {cell["id"] for cell in notebook["cells"] if cell_source(cell).startswith(SOLUTION_CELLS)}


def student_notebook(notebook: dict[str, Any], name: str, solutions: set[str] | None = None) -> StudentNotebook:
    """The student edition of ``notebook`` (nbformat 4 as a dict; ``name`` for the errors): solution regions
    stubbed, exercise solutions left out, outputs cleared. ``solutions``: the ids of the exercise solutions, for a
    translated notebook whose words differ (`solution_cells` of the English one; default: its own)."""
    result = StudentNotebook({**notebook, "cells": []})
    solutions = solution_cells(notebook) if solutions is None else solutions
    first_code = next((k for k, c in enumerate(notebook["cells"]) if c["cell_type"] == "code"), None)
    for k, cell in enumerate(notebook["cells"]):
        source = cell_source(cell)
        meta = nbgrader_meta(cell)
        if cell["id"] in solutions:
            continue
        cell = json.loads(json.dumps(cell))  # a copy: the course's notebook stays as it is
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"].pop("execution", None)
        if meta.get("solution") and BEGIN in source:
            where = f"{name}, cell {k}"
            cell["source"] = stub_solutions(source, where).splitlines(keepends=True)
            result.stubs += source.count(BEGIN)
            module = WRITEFILE.match(source)
            if module and module.group("name") not in result.references:  # all its steps, from its first cell
                steps = module_parts(notebook["cells"], module.group("name"))
                result.references[module.group("name")] = strip_markers(joined_parts(steps))
        if k == first_code:
            cell["source"] = [*EDITION_LINES.splitlines(keepends=True), *cell["source"]]
        if meta.get("grade"):
            result.graded += 1
            result.points += float(meta.get("points", 0))
        result.notebook["cells"].append(cell)
    return result


def write_student_edition(
    notebooks: str, out: str, names: Iterable[str] | None = None, english: str | None = None
) -> list[StudentNotebook]:
    """Write the student edition of the ``*.ipynb`` in ``notebooks`` (or only ``names``) to ``out``, with
    ``reference/`` holding the course's version of every build. ``out`` must be new, empty, or a student edition
    written before (its notebooks and references are replaced); it may not be ``notebooks`` itself. For a
    translation of the course, ``english`` is the folder of the English notebooks, which say which cells are the
    exercises' solutions."""
    notebooks, out = os.path.abspath(notebooks), os.path.abspath(out)
    if out == notebooks:
        raise LabkitValueError(f"{out}: the student edition goes to a folder of its own, not over the course")
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, MARK)):
        raise LabkitFileExistsError(
            f"{out} holds files that are not a student edition: name a new or empty folder (nothing is overwritten)"
        )
    chosen = sorted(names) if names is not None else sorted(n for n in os.listdir(notebooks) if n.endswith(".ipynb"))
    if not chosen:
        raise LabkitValueError(f"{notebooks}: no notebooks (*.ipynb) to make a student edition of")
    os.makedirs(os.path.join(out, REFERENCE_FOLDER), exist_ok=True)
    editions = []
    for name in chosen:
        solutions = None if english is None else solution_cells(read_notebook(os.path.join(english, name)))
        edition = student_notebook(read_notebook(os.path.join(notebooks, name)), name, solutions)
        write_atomic(os.path.join(out, name), notebook_text(edition.notebook).encode("utf-8"))
        for module, source in edition.references.items():
            write_atomic(os.path.join(out, REFERENCE_FOLDER, f"{module}.py"), source.encode("utf-8"))
        editions.append(edition)
    write_atomic(os.path.join(out, MARK), b"written by labkit course --student\n")
    return editions
