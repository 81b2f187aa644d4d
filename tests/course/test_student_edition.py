import json
import os

import pytest

from labkit.core.environment import clone_root
from labkit.core.errors import LabkitError
from labkit.course.builds import REFERENCE_FOLDER, stubs_left
from labkit.course.student_edition import (
    EDITION_LINES,
    MARK,
    WRITEFILE,
    nbgrader_meta,
    strip_markers,
    stub_solutions,
    student_notebook,
    write_student_edition,
)

BUILD = '''%%writefile {LAB}/lab99_sums.py
def double(x):
    """Twice x."""
    ### BEGIN SOLUTION: return twice x
    y = x + x
    return y
    ### END SOLUTION


class Box:
    def area(self):
        ### BEGIN SOLUTION — return the width times the height
        return self.w * self.h
        ### END SOLUTION
'''


def _code(source, nbgrader=None, hidden=False):
    meta = {"nbgrader": nbgrader} if nbgrader else {}
    if hidden:
        meta["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
    return {
        "cell_type": "code",
        "execution_count": 3,
        "id": f"c{abs(hash(source)) % 10**8}",
        "metadata": meta,
        "outputs": [{"output_type": "stream", "name": "stdout", "text": ["x\n"]}],
        "source": source.splitlines(keepends=True),
    }


def _notebook():
    return {
        "cells": [
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# 99 · Sums\n"]},
            _code("QUICK = True\n"),
            _code(BUILD, {"solution": True, "grade": False, "grade_id": "lab99", "locked": False, "schema_version": 3}),
            _code(
                "check_build(True, 'sums', lab99)\n",
                {
                    "grade": True,
                    "solution": False,
                    "grade_id": "lab99-check",
                    "locked": True,
                    "points": 2,
                    "schema_version": 3,
                },
            ),
            _code("# Solution to exercise 1: the answer is 4\nprint(4)\n", hidden=True),
            {
                "cell_type": "markdown",
                "id": "m2",
                "metadata": {"jupyter": {"source_hidden": True}},
                "source": ["**Solution to exercise 2.** Read the second line.\n"],
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_a_region_becomes_a_stub_that_raises_with_its_task_indented_as_its_begin_line():
    stubbed = stub_solutions(BUILD, "cell 2")
    assert '    raise NotImplementedError("not written yet: return twice x")' in stubbed
    assert '        raise NotImplementedError("not written yet: return the width times the height")' in stubbed
    assert "x + x" not in stubbed and "SOLUTION" not in stubbed and '"""Twice x."""' in stubbed
    assert stubs_left(stubbed) == ["return twice x", "return the width times the height"]
    compile(stubbed.split("\n", 1)[1], "lab99_sums.py", "exec")  # the stubbed module still imports


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("### BEGIN SOLUTION: a\n### BEGIN SOLUTION: b\n", "inside another"),
        ("### BEGIN SOLUTION: a\nx = 1\n", "has no END SOLUTION"),
        ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "without its task"),
        ("x = 1\n### END SOLUTION\n", "without a BEGIN SOLUTION"),
    ],
)
def test_a_malformed_region_is_named_with_its_cell_and_line(source, error):
    with pytest.raises(LabkitError, match=f"cell 7.*{error}"):
        stub_solutions(source, "cell 7")


def test_the_markers_are_stripped_for_the_course_s_version():
    assert strip_markers(BUILD).count("SOLUTION") == 0 and "return y" in strip_markers(BUILD)


def test_the_student_notebook_stubs_builds_clears_outputs_and_leaves_out_exercise_solutions():
    edition = student_notebook(_notebook(), "99_sums.ipynb")
    cells = edition.notebook["cells"]
    assert len(cells) == 4  # the collapsed solutions, code and markdown, are left out
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in cells if c["cell_type"] == "code")
    assert "".join(cells[1]["source"]).startswith(EDITION_LINES)  # its modules go apart from the course's
    assert stubs_left("".join(cells[2]["source"])) == ["return twice x", "return the width times the height"]
    assert edition.references == {"lab99_sums": strip_markers(BUILD.split("\n", 1)[1])}
    assert (edition.stubs, edition.graded, edition.points) == (2, 1, 2.0)
    assert "x + x" in "".join(_notebook()["cells"][2]["source"])  # the course's notebook is not touched


def test_the_edition_is_written_with_its_references_and_only_over_an_earlier_edition(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "99_sums.ipynb").write_text(json.dumps(_notebook()))
    out = tmp_path / "student"
    write_student_edition(str(course), str(out))
    assert (out / MARK).exists() and (out / "99_sums.ipynb").exists()
    assert "return y" in (out / REFERENCE_FOLDER / "lab99_sums.py").read_text()
    write_student_edition(str(course), str(out))  # an earlier edition is replaced
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(LabkitError, match="not a student edition"):
        write_student_edition(str(course), str(foreign))
    with pytest.raises(LabkitError, match="folder of its own"):
        write_student_edition(str(course), str(course))
    assert (foreign / "notes.txt").read_text() == "keep"


def test_a_module_written_in_steps_has_one_reference_of_all_its_steps():
    step = (
        "%%writefile -a {LAB}/lab99_sums.py\ndef half(x):\n"
        "    ### BEGIN SOLUTION: return half x\n    return x / 2\n    ### END SOLUTION\n"
    )
    notebook = _notebook()
    notebook["cells"].insert(3, _code(step, {"solution": True, "grade": False, "grade_id": "lab99_half"}))
    edition = student_notebook(notebook, "99_sums.ipynb")
    reference = edition.references["lab99_sums"]
    assert reference == strip_markers(BUILD.split("\n", 1)[1]) + "def half(x):\n    return x / 2\n"
    assert edition.stubs == 3
    namespace = {}
    exec(compile(reference, "lab99_sums.py", "exec"), namespace)
    assert namespace["double"](2) == 4 and namespace["half"](3) == 1.5


def _course_notebooks():
    folder = os.path.join(clone_root(), "notebooks")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".ipynb"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                yield name, json.load(f)


ARTICLE_AS_PRINTED = {"lab11_profile"}  # the article's code, run as printed: read, not written


def test_every_build_of_the_course_is_a_solution_cell_with_its_parts_marked_and_a_graded_check():
    for name, notebook in _course_notebooks():
        ids = [nbgrader_meta(c)["grade_id"] for c in notebook["cells"] if nbgrader_meta(c)]
        assert len(ids) == len(set(ids)), f"{name}: a grade_id twice"
        for k, cell in enumerate(notebook["cells"]):
            source, meta = "".join(cell["source"]), nbgrader_meta(cell)
            module = WRITEFILE.match(source)
            if module and module.group("name") not in ARTICLE_AS_PRINTED:
                name_ = module.group("name")
                assert meta.get("solution") and "BEGIN SOLUTION" in source, f"{name} cell {k}: a build without parts"
                assert f'"{name_}-check"' in json.dumps(ids), f"{name}: {name_} has no graded check"
            if meta.get("grade"):
                assert meta.get("points", 0) > 0 and meta.get("locked"), f"{name} cell {k}: a check without points"


def test_the_course_s_student_edition_stubs_every_build_and_keeps_each_reference_whole(tmp_path):
    editions = write_student_edition(os.path.join(clone_root(), "notebooks"), str(tmp_path / "student"))
    assert sum(e.stubs for e in editions) >= 20 and sum(e.graded for e in editions) >= 25
    for edition in editions:
        for module, source in edition.references.items():
            assert not stubs_left(source) and "SOLUTION" not in source
            compile(source, f"{module}.py", "exec")
