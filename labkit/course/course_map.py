"""The course map: each notebook, the article sections it follows and what it measures.

The table lives in one place, ``notebooks/README.md`` (read on the code host before anything runs);
``00_start_here`` shows it from there, so the two can never disagree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from labkit.core.environment import clone_root
from labkit.core.errors import LabkitError

HEADER = "| notebook | article section | what you measure |"


class CourseMapError(LabkitError, ValueError):
    """The course's README is missing or holds no course table."""


@dataclass(frozen=True, repr=False)
class CourseMap:
    """The table's rows as (notebook, article sections, what you measure); shown as Markdown in a notebook."""

    rows: tuple[tuple[str, str, str], ...]

    def markdown(self) -> str:
        lines = [HEADER, "| --- | --- | --- |"]
        lines += [f"| `{name}` | {sections} | {measured} |" for name, sections, measured in self.rows]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __repr__(self) -> str:  # the plain-text view (a terminal, nbval) reads as the same table
        return self.markdown()


def course_readme() -> str:
    """``notebooks/README.md`` of the clone labkit runs from."""
    root = clone_root()
    if root is None:
        raise CourseMapError(
            "labkit is installed, not run from a clone of the project, so there is no "
            "notebooks/README.md to read: clone the project and start the course with `make lab`"
        )
    return os.path.join(root, "notebooks", "README.md")


def parse_course_map(text: str, source: str = "notebooks/README.md") -> CourseMap:
    """The first table whose header is `HEADER` in ``text`` (Markdown); ``source`` names it in errors."""
    lines = text.splitlines()
    try:
        start = lines.index(HEADER)
    except ValueError:
        raise CourseMapError(f"{source} has no line {HEADER!r}: the course table starts with that header") from None
    rows = []
    for number, line in enumerate(lines[start + 2 :], start=start + 3):
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        name = re.fullmatch(r"`(\d\d_[a-z0-9_]+)`", cells[0]) if len(cells) == 3 else None
        if name is None:
            raise CourseMapError(
                f"{source}, line {number}: a row of the course table needs three cells, the first "
                f"a notebook's name in backticks, as in | `00_start_here` | 1 | ... |: {line!r}"
            )
        rows.append((name.group(1), cells[1], cells[2]))
    if not rows:
        raise CourseMapError(f"{source}: the course table under {HEADER!r} has no rows")
    return CourseMap(tuple(rows))


def course_map(readme: str | None = None) -> CourseMap:
    """The course table of ``readme`` (default: the clone's ``notebooks/README.md``)."""
    path = readme or course_readme()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CourseMapError(f"cannot read the course table from {path}: {e.strerror}") from None
    return parse_course_map(text, source=os.path.basename(os.path.dirname(path)) + "/" + os.path.basename(path))
