import pytest

from labkit.core.errors import LabkitError
from labkit.course.course_map import HEADER, CourseMapError, course_map, parse_course_map

TABLE = f"""# The course

{HEADER}
| --- | --- | --- |
| `00_start_here` | 1 | this machine |
| `04_workers_pin_prefetch` | 3.1–3.3, 6.4 | workers |

After the table.
"""


def test_the_rows_are_read_in_order_and_shown_as_the_same_markdown_table():
    table = parse_course_map(TABLE)
    assert table.rows == (
        ("00_start_here", "1", "this machine"),
        ("04_workers_pin_prefetch", "3.1–3.3, 6.4", "workers"),
    )
    shown = table._repr_markdown_()
    assert shown == repr(table) and shown.splitlines()[0] == HEADER
    assert parse_course_map(shown).rows == table.rows


def test_the_courses_own_readme_lists_every_notebook_once():
    names = [name for name, _, _ in course_map().rows]
    assert names == sorted(set(names)) and names[0] == "00_start_here"


@pytest.mark.parametrize(
    "text, message",
    [
        ("# no table here\n", "has no line"),
        (f"{HEADER}\n| --- | --- | --- |\n\n", "has no rows"),
        (f"{HEADER}\n| --- | --- | --- |\n| 00_start_here | 1 | no backticks |\n", "line 3"),
        (f"{HEADER}\n| --- | --- | --- |\n| `00_start_here` | 1 |\n", "three cells"),
    ],
)
def test_a_malformed_table_is_refused_with_the_line_and_the_fix(text, message):
    with pytest.raises(CourseMapError, match=message) as raised:
        parse_course_map(text, source="notebooks/README.md")
    assert isinstance(raised.value, LabkitError) and "notebooks/README.md" in str(raised.value)


def test_a_missing_readme_is_named(tmp_path):
    missing = tmp_path / "notebooks" / "README.md"
    with pytest.raises(CourseMapError, match="cannot read the course table from .*README.md"):
        course_map(str(missing))


def test_an_installed_labkit_says_where_the_table_is(monkeypatch):
    import labkit.course.course_map as module

    monkeypatch.setattr(module, "clone_root", lambda: None)
    with pytest.raises(CourseMapError, match="clone"):
        course_map()
