"""Every notebook in notebooks/ follows the course's conventions (docs/course_conventions.md).

These read the notebooks as committed, outputs included: what a learner sees on a code host
must be a clean quick run. Running them is nbval's job (`make test`).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from labkit.course.course_map import course_map

ROOT = Path(__file__).resolve().parents[2]
_STAMP_SPEC = importlib.util.spec_from_file_location("stamp_run_time", ROOT / "scripts" / "stamp_run_time.py")
stamp_run_time = importlib.util.module_from_spec(_STAMP_SPEC)
_STAMP_SPEC.loader.exec_module(stamp_run_time)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_OUTPUT_BYTES = 2_000_000
# Directories that only exist on the machine that ran a notebook; /dev/shm and the like are fine.
MACHINE_PATH = re.compile(
    r"(?<![\w.])(?:/(?:home|root|tmp|work|Users|private|var/folders|mnt|scratch)/[\w.@+-]+"
    r"|[A-Za-z]:\\\\?Users\\)"
)
DATASET_BASES = ("Dataset", "IterableDataset", "Sampler", "BatchSampler")
REQUIRED_HEADINGS = ("learning goals", "takeaways", "exercises")


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=nbformat.NO_CONVERT)


def _code(cell: nbformat.NotebookNode) -> str:
    """A code cell's source as Python: IPython magics and shell lines commented out."""
    lines = cell.source.splitlines()
    return "\n".join("# " + line if line.lstrip().startswith(("%", "!")) else line for line in lines)


def _code_cells(nb: nbformat.NotebookNode) -> Iterator[tuple[int, nbformat.NotebookNode]]:
    for k, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            yield k, cell


def _output_text(output: nbformat.NotebookNode) -> str:
    return json.dumps(output, ensure_ascii=False)


def test_the_course_has_notebooks_and_readme_lists_each_one():
    assert NOTEBOOKS, "notebooks/ has no notebook"
    readme = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\b(\d\d_[a-z0-9_]+)\b", readme))
    present = {p.stem for p in NOTEBOOKS}
    assert present <= listed, f"notebooks/README.md does not list {sorted(present - listed)}"
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+", p.stem) for p in NOTEBOOKS)


SECTION = r"\d+(?:\.\d+)?(?:–\d+(?:\.\d+)?)?"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_the_course_map_gives_the_seed_sections_the_header_cites(path):
    """The course map (notebooks/README.md) and a notebook's opening cell name the same article sections."""
    rows = {name: sections for name, sections, _ in course_map().rows}
    assert path.stem in rows, f"the course table in notebooks/README.md has no row for {path.stem}"
    header = _read(path).cells[0].source
    cited = set()
    for run in re.finditer(rf"\bsections? ((?:{SECTION}(?:, | and )?)+)", header):
        cited |= set(re.findall(SECTION, run.group(1)))
    assert cited, "the opening cell cites no article section ('section 2.1', 'sections 3.1–3.3 and 6.4')"
    listed = {s.strip() for s in rows[path.stem].split(",")}
    assert listed == cited, f"the course map gives sections {sorted(listed)}, the header cites {sorted(cited)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_valid_nbformat_4_with_execution_counts(path):
    nb = _read(path)
    assert nb.nbformat == 4
    nbformat.validate(nb)
    stored = json.loads(path.read_text(encoding="utf-8"))  # as written: reading fills in missing ids with a warning
    ids = [cell.get("id") for cell in stored["cells"]]
    assert None not in ids, f"cell {ids.index(None)} has no id (nbformat 4.5 requires one; a hand-inserted cell?)"
    assert len(set(ids)) == len(ids), "two cells share an id"
    for k, cell in _code_cells(nb):
        if cell.outputs:
            assert cell.execution_count is not None, f"cell {k} has outputs but no execution count (nbval fails it)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_error_output_except_where_the_lab_raises_on_purpose(path):
    for k, cell in _code_cells(_read(path)):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if "raises-exception" in cell.metadata.get("tags", []):
            assert errors, f"cell {k} is tagged raises-exception but stored no error: the lab shows nothing"
        else:
            assert not errors, f"cell {k} stored {errors[0].ename}: {errors[0].evalue}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_absolute_path_of_the_machine_that_ran_it(path):
    nb = _read(path)
    here = {str(ROOT), os.path.expanduser("~")} - {"/"}
    stored = [(f"cell {k}", _output_text(o)) for k, cell in _code_cells(nb) for o in cell.outputs]
    stored += [(f"cell {k} source", cell.source) for k, cell in enumerate(nb.cells)]
    stored.append(("metadata", json.dumps(nb.metadata)))
    for where, text in stored:
        found = MACHINE_PATH.search(text) or next((re.search(re.escape(p), text) for p in here if p in text), None)
        assert not found, f"{where} shows the path {found.group(0)!r}: print paths relative to data_root()"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_outputs_stay_small(path):
    nb = _read(path)
    size = sum(len(_output_text(o).encode()) for _, cell in _code_cells(nb) for o in cell.outputs)
    size += len(json.dumps(nb.metadata.get("widgets", {})).encode())
    assert size < MAX_OUTPUT_BYTES, f"{size / 1e6:.1f} MB of outputs: smaller figures (dpi ~80-100), fewer prints"


MAX_CODE_LINES = 40


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_code_cells_stay_short_enough_to_read(path):
    """A learner reads a cell at a glance: a longer build is written in steps (``%%writefile -a``), and machinery
    goes into labkit."""
    for k, cell in _code_cells(_read(path)):
        lines = len(cell.source.splitlines())
        assert lines <= MAX_CODE_LINES, f"cell {k} has {lines} lines: split it, or move its machinery into labkit"


def _writes_a_module(cell: nbformat.NotebookNode) -> bool:
    return cell.source.lstrip().startswith("%%writefile")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_dataset_or_sampler_class_defined_in_a_cell(path):
    """Workers started by spawn or forkserver cannot unpickle a class defined in a notebook: a learner's dataset
    is written to a module of its own (``%%writefile``) and imported from there."""
    for k, cell in _code_cells(_read(path)):
        if _writes_a_module(cell):
            continue
        for node in ast.walk(ast.parse(_code(cell))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                assert not any(b.endswith(DATASET_BASES) for b in bases), (
                    f"cell {k} defines {node.name}({', '.join(bases)}): put it in labkit and import it"
                )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_title_goals_takeaways_and_exercises(path):
    nb = _read(path)
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    assert markdown and nb.cells[0].cell_type == "markdown" and markdown[0].startswith("# "), (
        "the first cell is a title"
    )
    headings = [
        line.lstrip("#").strip().lower() for text in markdown for line in text.splitlines() if line.startswith("#")
    ]
    for required in REQUIRED_HEADINGS:
        assert any(h.startswith(required) for h in headings), f"no '{required}' heading"
    first_code = next(cell for _, cell in _code_cells(nb))
    assert "quick_mode" in first_code.source and "course_workspace" in first_code.source, (
        "the first code cell is the course's setup (QUICK, ws = course_workspace(...))"
    )


HEADER_TIME = re.compile(
    r"\*\*Time:\*\* (\d+) s in quick mode, measured .*?; (\d+) s under the spawn start method"
    r".*?Full mode \(`LABKIT_QUICK=0`\), measured (?:the same way|[^:]*? on a [^:]*?): (\d+) s",
    re.S,
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_the_header_states_measured_times_for_quick_spawn_and_full_mode(path):
    # How long a learner waits is a measurement like any other: quoted in seconds, never "estimated".
    header = _read(path).cells[0].source
    found = HEADER_TIME.search(header)
    assert found, "the title cell's **Time:** line gives quick-mode, spawn and full-mode seconds, measured"
    assert "estimated" not in header and "not timed" not in header
    stored = stamp_run_time.run_seconds(_read(path))
    assert stored is not None, "the notebook is committed executed, with its cells' timings"
    assert int(found.group(1)) == stored, (
        f"the header says {found.group(1)} s in quick mode, the stored run took "
        f"{stored} s: python scripts/stamp_run_time.py {path}"
    )
    assert stored < 60, "quick mode runs each notebook in under a minute on 2 cores"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_labkit_name_imported_exists(path):
    for k, cell in _code_cells(_read(path)):
        for node in ast.walk(ast.parse(_code(cell))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "labkit":
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert (
                        alias.name == "*"
                        or hasattr(module, alias.name)
                        or importlib.util.find_spec(f"{node.module}.{alias.name}")
                    ), f"cell {k}: {node.module} has no {alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "labkit":
                        importlib.import_module(alias.name)


SOLUTION = re.compile(r"^(?:# Solution to exercise|\*\*Solution to exercise) (\d+)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_exercise_solutions_are_collapsed(path):
    """A learner should try an exercise before reading its answer (a code solution, or a markdown one)."""
    for k, cell in enumerate(_read(path).cells):
        if SOLUTION.match(cell.source.lstrip()):
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, (
                f'cell {k} is a solution: set "jupyter": {{"source_hidden": true}} in its metadata'
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_a_learner_module_is_written_to_the_learner_folder_never_into_notebooks(path):
    nb = _read(path)
    writers = [cell for _, cell in _code_cells(nb) if _writes_a_module(cell)]
    if not writers:
        return
    assert any("learner_folder(" in cell.source for _, cell in _code_cells(nb)), "no learner_folder() for %%writefile"
    for cell in writers:
        target = cell.source.lstrip().splitlines()[0].split(maxsplit=1)[1].removeprefix("-a ")
        assert target.startswith("{LAB}/"), f"%%writefile {target}: write into {{LAB}}/ (labkit's learner_folder)"
        ast.parse("\n".join(cell.source.lstrip().splitlines()[1:]))  # the module it writes is valid Python


def _top_level_bindings(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """(name, line) of every name a cell binds in the notebook's namespace: assignments, for targets, with targets,
    functions and classes at the top level of the cell (a function's own locals are not the notebook's)."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Lambda)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id, node.lineno
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # a comprehension's variable is its own
        pending.extend(ast.iter_child_nodes(node))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_no_cell_rebinds_a_name_another_cell_imports(path):
    """A learner re-runs cells out of order: a cell that rebinds an imported name (``count = ...`` over
    ``labkit.core.wording.count``) breaks every cell that uses the import once it has run."""
    cells = [(k, ast.parse(_code(cell))) for k, cell in _code_cells(_read(path))]
    imported = {}
    for k, tree in cells:
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    imported.setdefault(alias.asname or alias.name.split(".")[0], k)
    rebound = [
        f"cell {k} line {line} rebinds {name}, imported in cell {imported[name]}"
        for k, tree in cells
        for name, line in _top_level_bindings(tree)
        if name in imported
    ]
    assert not rebound, "\n".join(rebound)


def _exercises(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and "## Exercises" in cell.source:
            text = cell.source[cell.source.index("## Exercises") :]
            return [(int(m.group(1)), m.group(2)) for m in re.finditer(r"(?ms)^(\d+)\. (.*?)(?=^\d+\. |\Z)", text)]
    return []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_exercise_has_a_graded_check_or_a_collapsed_solution_and_none_gives_its_answer(path):
    nb = _read(path)
    solutions = {int(m.group(1)) for cell in nb.cells if (m := SOLUTION.match(cell.source.lstrip()))}
    graded = set()
    for k, cell in enumerate(nb.cells[:-1]):
        asked = re.match(r"# Exercise (\d+):", cell.source)
        if asked and cell.metadata.get("nbgrader", {}).get("solution"):
            assert nb.cells[k + 1].metadata.get("nbgrader", {}).get("grade"), f"exercise {asked.group(1)}: no check"
            graded.add(int(asked.group(1)))
    exercises = _exercises(nb)
    assert exercises, "the notebook has no exercises"
    for number, text in exercises:
        assert number in solutions | graded, f"exercise {number}: give it a graded check or a collapsed solution"
        assert "good answer" not in " ".join(text.lower().split()), f"exercise {number}: the question gives its answer"
    assert graded | solutions <= {n for n, _ in exercises}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_a_solution_hides_its_outputs_too(path):
    for k, cell in enumerate(_read(path).cells):
        if cell.cell_type == "code" and SOLUTION.match(cell.source.lstrip()):
            assert cell.metadata.get("jupyter", {}).get("outputs_hidden") is True, f"cell {k}: hide its outputs"
