"""The course in another language: its notebooks built from the English ones and one translator's file each.

A translation file (``notebooks/zh/translations/<notebook>.md``) is Markdown a translator edits, one entry per
translated cell, each under a line that names the English cell and the English text it translates::

    <!-- cell=16bcb1a3 en=5f3a9c2e1b4d -->
    # 01 · Dataset：`__getitem__` 的时间花在哪里

    <!-- cell=ccaf8d5c en=0a1b2c3d4e5f code -->
    ```python
    LAB = shown_path(learner_folder("01"))  # 相对于此处打印
    ```

``en`` is `source_hash` of the English cell's source: when the English text changes, the entry is *stale* and says
so until it is translated again. A markdown cell's entry is the cell in the other language. A code cell's entry
(``code``) is the cell with its comments translated and nothing else: `same_code` compares the two token by token,
comments aside, so the code a learner runs is the English code. An entry marked ``todo`` holds text still to
translate (`write_todo` writes them) and counts as missing.

`build_translated_notebook` makes a notebook of the edition: the English notebook with each cell's source replaced by
its entry, keeping the English cells' ids, metadata and stored outputs (the code is the same, so the outputs are
those of an English run). `check_edition` lists what keeps an edition from being complete and current.
``labkit course --translate zh`` builds the Chinese edition (``--check``: only check; ``--todo``: `write_todo`).
"""

from __future__ import annotations

import copy
import hashlib
import io
import os
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from labkit.core.atomic import write_atomic
from labkit.core.errors import LabkitValueError
from labkit.course.notebook_files import cell_source, notebook_text, read_notebook

#: The line that opens an entry.
MARKER = re.compile(r"^<!-- cell=(?P<cell>[\w-]+) en=(?P<hash>[0-9a-f]{12})(?P<flags>(?: (?:code|todo))*) -->$")
#: Where each edition's notebooks and translation files live, under the course's folder.
TRANSLATIONS = "translations"
#: What a translation file starts with (a translator reads it; the parser skips everything before the first entry).
FILE_HEADER = """\
<!-- The {language} text of {notebook}: one entry per cell, each under its marker line. Edit the text under a
marker, never the marker itself; after the English cell changes, translate it again and put the new hash in the
marker (labkit course --translate {language} --todo marks what changed). A code entry may change only comments. -->
"""
_FENCE_OPEN = "```python"
_FENCE_CLOSE = "```"


#: A header's measured times, written by the runs (scripts/stamp_run_time.py, the spawn runs), not by a
#: translator: the hash leaves these numbers out, and a translation names them ``{quick}``, ``{spawn}``, ``{full}``,
#: which the build fills in from the English header.
TIME_FIGURES = re.compile(
    r"\*\*Time:\*\* (?P<quick>\d+) s in quick mode[^\n]*?; (?P<spawn>\d+) s under the spawn start method"
    r"[^\n]*?: (?P<full>\d+) s\."
)


def _without_figures(source: str) -> str:
    """``source`` with the numbers of its Time line replaced by their names, as a translation writes them."""
    found = TIME_FIGURES.search(source)
    if found is None:
        return source
    parts, last = [], found.start()
    for name in ("quick", "spawn", "full"):
        parts += [source[last : found.start(name)], "{" + name + "}"]
        last = found.end(name)
    return source[: found.start()] + "".join(parts) + source[last:]


def time_figures(source: str) -> dict[str, str]:
    """The measured times an English header states, by name (none for a cell without a Time line)."""
    found = TIME_FIGURES.search(source)
    return {} if found is None else {name: found.group(name) for name in ("quick", "spawn", "full")}


def source_hash(source: str) -> str:
    """The first 12 hex digits of the SHA-256 of ``source`` (a cell's text as one string), its Time line's
    measured numbers left out: a new run's times do not make a translation stale."""
    return hashlib.sha256(_without_figures(source).encode("utf-8")).hexdigest()[:12]


def filled_text(entry_text: str, english: str) -> str:
    """A markdown entry's text with the English header's measured times put in for ``{quick}``, ``{spawn}``,
    ``{full}``."""
    for name, value in time_figures(english).items():
        entry_text = entry_text.replace("{" + name + "}", value)
    return entry_text


@dataclass(frozen=True)
class Entry:
    """One cell's translation: the English cell it is for, the hash of the English text it translates, its text."""

    cell: str
    en_hash: str
    text: str
    code: bool = False
    todo: bool = False


def parse_translations(text: str, where: str) -> dict[str, Entry]:
    """The entries of a translation file's ``text``, by English cell id; ``where`` names the file in the errors
    (a cell translated twice, a code entry not fenced as ```python … ```)."""
    entries: dict[str, Entry] = {}
    current: tuple[re.Match[str], int] | None = None
    body: list[str] = []

    def close() -> None:
        if current is None:
            return
        match, line = current
        flags = match.group("flags").split()
        text = "\n".join(body).strip("\n")
        if "code" in flags:
            lines = text.split("\n")
            if len(lines) < 2 or lines[0].strip() != _FENCE_OPEN or lines[-1].strip() != _FENCE_CLOSE:
                raise LabkitValueError(
                    f"{where}, line {line}: the code entry of cell {match.group('cell')} is not fenced: put the cell "
                    f"between a line '{_FENCE_OPEN}' and a line '{_FENCE_CLOSE}'"
                )
            text = "\n".join(lines[1:-1])
        cell = match.group("cell")
        if cell in entries:
            raise LabkitValueError(f"{where}, line {line}: cell {cell} is translated twice; keep one entry")
        entries[cell] = Entry(cell, match.group("hash"), text, code="code" in flags, todo="todo" in flags)

    for number, line in enumerate(text.split("\n"), 1):
        match = MARKER.match(line.strip())
        if match:
            close()
            current, body = (match, number), []
        elif line.startswith("<!-- cell="):
            raise LabkitValueError(
                f"{where}, line {number}: {line.strip()!r} is not a marker: write it as "
                "'<!-- cell=<id> en=<12 hex digits> -->' (add ' code' for a code cell)"
            )
        elif current is not None:
            body.append(line)
    close()
    return entries


def format_entry(entry: Entry) -> str:
    """``entry`` as a translation file holds it."""
    flags = (" code" if entry.code else "") + (" todo" if entry.todo else "")
    text = f"{_FENCE_OPEN}\n{entry.text}\n{_FENCE_CLOSE}" if entry.code else entry.text
    return f"<!-- cell={entry.cell} en={entry.en_hash}{flags} -->\n{text}\n"


def format_translations(entries: list[Entry], notebook: str, language: str) -> str:
    """A translation file holding ``entries`` in their order, after the header for the translator."""
    return FILE_HEADER.format(language=language, notebook=notebook) + "\n" + "\n".join(map(format_entry, entries))


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    """The Python tokens of a code cell; IPython's magics and shell escapes (lines starting with ``%`` or ``!``)
    count as one token each."""
    lines = []
    for line in source.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            line = line[: len(line) - len(stripped)] + f"__ipython__({stripped!r})"
        lines.append(line)
    return list(tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline))


def _python_tokens(source: str) -> list[tuple[int, str]]:
    """The tokens of ``source`` that are code (no comments, no blank lines)."""
    return [(t.type, t.string) for t in _tokens(source) if t.type not in (tokenize.COMMENT, tokenize.NL)]


def has_comments(source: str) -> bool:
    """True when the code cell ``source`` holds a comment (the part of it a translation may change)."""
    try:
        return any(t.type == tokenize.COMMENT for t in _tokens(source))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False


def same_code(english: str, translated: str) -> bool:
    """True when ``translated`` is ``english`` with only its comments changed. A cell that does not read as
    Python must be identical."""
    try:
        return _python_tokens(english) == _python_tokens(translated)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return english == translated


@dataclass(frozen=True)
class Problem:
    """What keeps one cell of an edition from being complete and current."""

    notebook: str
    cell: str
    kind: str  # "missing", "stale", "code differs", "no such cell", "wrong kind"
    fix: str

    def __str__(self) -> str:
        return f"{self.notebook}, cell {self.cell}: {self.kind} — {self.fix}"


def translation_problems(english: dict[str, Any], entries: dict[str, Entry], name: str) -> list[Problem]:
    """Each markdown cell of ``english`` without a current entry, each entry that is stale, whose code differs,
    whose cell is gone, or that is a code entry for a markdown cell (or the other way round)."""
    problems: list[Problem] = []
    cells = {cell["id"]: cell for cell in english["cells"]}
    for cell_id, cell in cells.items():
        source, entry = cell_source(cell), entries.get(cell_id)
        is_code = cell["cell_type"] == "code"
        if entry is not None and entry.todo:
            problems.append(Problem(name, cell_id, "missing", "its entry is marked todo; translate it, drop 'todo'"))
            continue
        if entry is None:
            if not is_code and source.strip():
                problems.append(Problem(name, cell_id, "missing", "the markdown cell has no entry; translate it"))
            continue
        if entry.code != is_code:
            want = "a code entry (add ' code' to its marker)" if is_code else "a markdown entry (no ' code')"
            problems.append(Problem(name, cell_id, "wrong kind", f"the cell is {cell['cell_type']}: make it {want}"))
        elif entry.en_hash != source_hash(source):
            problems.append(
                Problem(
                    name,
                    cell_id,
                    "stale",
                    f"the English text changed (its hash is now {source_hash(source)}, the entry translates "
                    f"{entry.en_hash}); translate the cell again and put the new hash in its marker",
                )
            )
        elif is_code and not same_code(source, entry.text):
            problems.append(Problem(name, cell_id, "code differs", "a code entry may change only the comments"))
        elif any("{" + figure + "}" not in entry.text for figure in time_figures(source)):
            problems.append(
                Problem(name, cell_id, "stale", "the English states measured times: write {quick}, {spawn}, {full}")
            )
    for cell_id in entries.keys() - cells.keys():
        problems.append(Problem(name, cell_id, "no such cell", "the English notebook has no cell with this id"))
    return problems


def build_translated_notebook(
    english: dict[str, Any], entries: dict[str, Entry], language: str, problems: list[Problem] | None = None
) -> dict[str, Any]:
    """The ``language`` edition of ``english``: each cell's source replaced by its entry, ids, metadata and outputs
    kept; a cell whose entry has a problem (``problems``, `translation_problems` when not given) stays English."""
    if problems is None:
        problems = translation_problems(english, entries, "")
    unusable = {problem.cell for problem in problems}
    notebook = copy.deepcopy(english)
    for cell in notebook["cells"]:
        entry = entries.get(cell["id"])
        if entry is None or cell["id"] in unusable:
            continue
        text = entry.text if entry.code else filled_text(entry.text, cell_source(cell))
        cell["source"] = text.splitlines(keepends=True)
    notebook["metadata"] = {**notebook["metadata"], "language": language}
    return notebook


def translation_file(course: str, language: str, notebook: str) -> str:
    """Where the ``language`` text of ``course``/``notebook`` (an ``.ipynb`` name) lives."""
    return os.path.join(course, language, TRANSLATIONS, notebook.removesuffix(".ipynb") + ".md")


def read_entries(course: str, language: str, notebook: str) -> dict[str, Entry]:
    """The entries of a notebook's translation file (none when the file is not there yet)."""
    path = translation_file(course, language, notebook)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return parse_translations(f.read(), path)


def english_notebooks(course: str) -> list[str]:
    """The course's notebooks (``*.ipynb`` directly in ``course``), in order."""
    names = sorted(n for n in os.listdir(course) if n.endswith(".ipynb"))
    if not names:
        raise LabkitValueError(f"{course}: no notebooks (*.ipynb) to translate; name the course's folder")
    return names


@dataclass(frozen=True)
class EditionState:
    """An edition against the English course: what is missing or stale, and which built notebooks differ from
    what the translations make."""

    problems: list[Problem]
    out_of_date: list[str]  # notebooks of the edition whose file is not what build_edition would write


def _editions(course: str, language: str) -> Iterator[tuple[str, list[Problem], str, str | None]]:
    """For each notebook of the course: its name, its translation's problems, the text of its ``language``
    edition as the translation makes it, and that edition's file as it is (None where there is none)."""
    for name in english_notebooks(course):
        english = read_notebook(os.path.join(course, name))
        entries = read_entries(course, language, name)
        problems = translation_problems(english, entries, name)
        built = notebook_text(build_translated_notebook(english, entries, language, problems))
        path = os.path.join(course, language, name)
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        yield name, problems, built, current


def check_edition(course: str, language: str) -> EditionState:
    """Compare the ``language`` edition under ``course``/``language`` with the English notebooks in ``course``
    and their translation files, writing nothing."""
    state = EditionState([], [])
    for name, problems, built, current in _editions(course, language):
        state.problems.extend(problems)
        if current != built:
            state.out_of_date.append(name)
    return state


def build_edition(course: str, language: str) -> list[str]:
    """Write every notebook of the ``language`` edition that differs from what its translation makes; the names
    written. Cells not translated yet stay English (`check_edition` lists them)."""
    written = []
    for name, _, built, current in _editions(course, language):
        if current != built:
            write_atomic(os.path.join(course, language, name), built.encode("utf-8"))
            written.append(name)
    return written


def todo_entries(english: dict[str, Any], entries: dict[str, Entry]) -> list[Entry]:
    """The entries of a notebook's translation file in the English cells' order, with an entry marked ``todo``
    (holding the English text) for each markdown cell not translated yet and each code cell with comments, and
    each stale entry marked ``todo`` with the new hash (its old translation kept to edit). Entries of cells that
    are gone are dropped."""
    result = []
    for cell in english["cells"]:
        source, entry = cell_source(cell), entries.get(cell["id"])
        if entry is None:
            if cell["cell_type"] == "markdown" and source.strip():
                result.append(Entry(cell["id"], source_hash(source), _without_figures(source), todo=True))
            elif cell["cell_type"] == "code" and has_comments(source):
                result.append(Entry(cell["id"], source_hash(source), source, code=True, todo=True))
        elif entry.en_hash != source_hash(source):
            result.append(Entry(cell["id"], source_hash(source), entry.text, code=entry.code, todo=True))
        else:
            result.append(entry)
    return result


def write_todo(course: str, language: str) -> list[tuple[str, int, int]]:
    """Rewrite every translation file of the ``language`` edition with `todo_entries` (made where missing); for
    each, (its path, entries to translate, entries)."""
    done = []
    for name in english_notebooks(course):
        entries = todo_entries(read_notebook(os.path.join(course, name)), read_entries(course, language, name))
        path = translation_file(course, language, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, format_translations(entries, name, language).encode("utf-8"))
        done.append((path, sum(e.todo for e in entries), len(entries)))
    return done
