"""The Chinese edition of the course (``notebooks/zh/``) is complete and current: every English markdown cell has a
translation made for its present text, each notebook is what its translation file builds, its code is the English
code (comments aside) with the English outputs, and its links land. nbval does not run it again: its code is the
English code, which nbval runs."""

import json
import os
import re
import subprocess
import sys

import pytest

from labkit.core.environment import clone_root
from labkit.course.student_edition import solution_cells, write_student_edition
from labkit.course.translation import cell_source, check_edition, english_notebooks, same_code

NOTEBOOKS = os.path.join(clone_root(), "notebooks")
LANGUAGE = "zh"
EDITION = os.path.join(NOTEBOOKS, LANGUAGE)
CJK = re.compile(r"[\u4e00-\u9fff]")
LINK = re.compile(r"\]\(([^)\s]+)\)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def _read(folder, name):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
        return json.load(f)


def test_every_cell_is_translated_for_its_present_english_text_and_every_notebook_is_built():
    state = check_edition(NOTEBOOKS, LANGUAGE)
    assert not state.problems, "\n".join(map(str, state.problems[:20])) + "\n(labkit course --translate zh)"
    assert not state.out_of_date, (
        f"{state.out_of_date}: not what their translation files make; run labkit course --translate zh"
    )


@pytest.mark.parametrize("name", english_notebooks(NOTEBOOKS))
def test_the_edition_runs_the_english_code_and_shows_the_english_outputs(name):
    english, translated = _read(NOTEBOOKS, name), _read(EDITION, name)
    assert [(c["id"], c["cell_type"]) for c in translated["cells"]] == [
        (c["id"], c["cell_type"]) for c in english["cells"]
    ]
    for ours, theirs in zip(translated["cells"], english["cells"]):
        if theirs["cell_type"] == "code":
            assert same_code(cell_source(theirs), cell_source(ours)), f"cell {ours['id']}: the code differs"
            assert ours["outputs"] == theirs["outputs"] and ours["metadata"] == theirs["metadata"]
        elif cell_source(theirs).strip():
            assert CJK.search(cell_source(ours)), f"cell {ours['id']} has no Chinese: is it still the English text?"


def _anchors(notebook):
    return {a for cell in notebook["cells"] for a in ANCHOR.findall(cell_source(cell))}


def test_the_glossary_has_every_term_of_the_english_one_and_every_link_lands():
    first = english_notebooks(NOTEBOOKS)[0]
    terms = [{a for a in _anchors(_read(folder, first)) if a.startswith("g-")} for folder in (EDITION, NOTEBOOKS)]
    assert terms[0] == terms[1] != set(), "the glossaries differ in their terms (the g-… anchors)"
    for name in english_notebooks(NOTEBOOKS):
        for cell in _read(EDITION, name)["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for target in LINK.findall(cell_source(cell)):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                where = os.path.normpath(os.path.join(EDITION, path)) if path else os.path.join(EDITION, name)
                assert os.path.exists(where), f"{name}, cell {cell['id']}: the link {target} goes nowhere"
                if anchor and where.endswith(".ipynb"):
                    assert anchor in _anchors(_read(os.path.dirname(where), os.path.basename(where))), (
                        f"{name}, cell {cell['id']}: {target} names no anchor of {path or name}"
                    )


def test_the_student_edition_of_the_translation_has_the_english_one_s_builds_and_checks(tmp_path):
    english = write_student_edition(NOTEBOOKS, str(tmp_path / "en"))
    translated = write_student_edition(EDITION, str(tmp_path / "zh"), english=NOTEBOOKS)
    assert [(e.stubs, e.graded, e.points) for e in translated] == [(e.stubs, e.graded, e.points) for e in english]
    for name, edition in zip(english_notebooks(NOTEBOOKS), translated):
        kept = {cell["id"] for cell in edition.notebook["cells"]}
        assert not kept & solution_cells(_read(NOTEBOOKS, name)), f"{name}: an exercise's solution is still there"
    assert sorted(os.listdir(tmp_path / "zh" / "reference")) == sorted(os.listdir(tmp_path / "en" / "reference"))


def test_the_command_checks_without_writing_and_names_what_is_left(tmp_path):
    command = [sys.executable, "-m", "labkit", "course", "--translate", LANGUAGE, "--check"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "the zh edition is complete and built" in run.stdout, run.stdout + run.stderr
    course = tmp_path / "notebooks"
    course.mkdir()
    name = english_notebooks(NOTEBOOKS)[-1]
    (course / name).write_text(json.dumps(_read(NOTEBOOKS, name)), encoding="utf-8")
    run = subprocess.run([*command, "--notebooks", str(course)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and f"{name}, cell " in run.stdout and "missing" in run.stdout
    assert not (course / "zh").exists()  # --check writes nothing
    run = subprocess.run([*command[:-1], "--todo", "--notebooks", str(course)], capture_output=True, text=True)
    assert run.returncode == 0 and "entries to translate" in run.stdout
    assert (course / "zh" / "translations" / name.replace(".ipynb", ".md")).exists()
