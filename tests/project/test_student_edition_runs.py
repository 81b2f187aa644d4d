"""The student edition runs: generated from the course, executed top to bottom in quick mode with every build a stub
and every answer unwritten (each check says "not written yet" and the notebook carries on with the course's
version), and again with every build and answer wrong (each graded check fails)."""

import json
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

from labkit.core.environment import clone_root
from labkit.course.student_edition import nbgrader_meta, write_student_edition

NOTEBOOKS = os.path.join(clone_root(), "notebooks")
WRONG_BUILD = re.compile(r"raise NotImplementedError\(\"not written yet: [^\n]*\"\)")
UNANSWERED = re.compile(r"^((?:ANSWER_\w+, )*ANSWER_\w+) = (None(?:, None)*)", re.M)


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    write_student_edition(NOTEBOOKS, str(out))
    return out


def _names():
    return sorted(n for n in os.listdir(NOTEBOOKS) if n.endswith(".ipynb"))


def _execute(path, folder, allow_errors, last_cell=None):
    notebook = nbformat.read(path, as_version=4)
    if last_cell is not None:
        notebook.cells = notebook.cells[: last_cell + 1]
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": folder}},
    )
    client.execute()
    return notebook


def _text(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.parametrize("name", _names())
def test_the_student_edition_runs_through_with_nothing_written(edition, name, monkeypatch):
    monkeypatch.setenv("LABKIT_QUICK", "1")
    monkeypatch.delenv("LABKIT_GRADING", raising=False)
    notebook = _execute(str(edition / name), str(edition), allow_errors=False)
    for k, cell in enumerate(notebook.cells):
        if nbgrader_meta(cell).get("grade"):
            assert re.search(r"not written yet|not answered yet", _text(cell)), f"{name} cell {k}: {_text(cell)[-300:]}"


@pytest.mark.parametrize("name", _names())
def test_every_graded_check_fails_on_a_wrong_build_or_answer(edition, name, tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_QUICK", "1")
    with open(edition / name, encoding="utf-8") as f:
        notebook = json.load(f)
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        source = source.replace('use_edition("student")', 'use_edition("student-wrong")')
        source = WRONG_BUILD.sub("return None", source)  # written, and wrong
        source = UNANSWERED.sub(lambda m: m.group(1) + " = " + ", ".join(["-1"] * (m.group(2).count("None"))), source)
        cell["source"] = source.splitlines(keepends=True)
    graded = [k for k, cell in enumerate(notebook["cells"]) if nbgrader_meta(cell).get("grade")]
    path = tmp_path / name
    path.write_text(json.dumps(notebook), encoding="utf-8")
    ran = _execute(str(path), str(edition), allow_errors=True, last_cell=max(graded))
    passed = [k for k in graded if not _errors(ran.cells[k])]
    assert not passed, f"{name}: graded cells {passed} passed a wrong build or answer"
