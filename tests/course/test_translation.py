import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.core.errors import LabkitError
from labkit.course.translation import (
    Entry,
    build_edition,
    build_translated_notebook,
    check_edition,
    format_translations,
    notebook_text,
    parse_translations,
    same_code,
    source_hash,
    time_figures,
    todo_entries,
    translation_file,
    translation_problems,
)

HEADER = (
    "# 99 · Sums\n\n**Time:** 7 s in quick mode, measured on a 2-core VM with the data already made; 15 s under the "
    "spawn start method (macOS, Windows). Full mode (`LABKIT_QUICK=0`), measured earlier on a 2-core VM: 12 s."
)
CODE = (
    "%%writefile {LAB}/lab99.py\n"
    "def f(x):  # twice x\n"
    "    # the sum\n"
    '    return x + x, "#1"  # a string holding # is code\n'
)


def _cell(kind, cell_id, source, outputs=None):
    cell = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=1, outputs=outputs or [])
    return cell


def _english():
    return {
        "cells": [
            _cell("markdown", "title", HEADER),
            _cell("code", "build", CODE, [{"output_type": "stream", "name": "stdout", "text": ["written\n"]}]),
            _cell("markdown", "why", "Why it *works*: [the glossary](00_start_here.ipynb#g-batch)."),
            _cell("code", "plain", "print(1)\n"),
        ],
        "metadata": {"kernelspec": {"name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _entries(english):
    src = {c["id"]: "".join(c["source"]) for c in english["cells"]}
    return {
        "title": Entry(
            "title",
            source_hash(src["title"]),
            "# 99 · 求和\n\n**用时：** 快速模式 {quick} 秒，spawn {spawn} 秒，完整 {full} 秒。",
        ),
        "build": Entry("build", source_hash(src["build"]), CODE.replace("# twice x", "# x 的两倍"), code=True),
        "why": Entry("why", source_hash(src["why"]), "为什么*可行*：[术语表](00_start_here.ipynb#g-batch)。"),
    }


def test_the_hash_follows_the_text_but_not_the_measured_times_of_the_header():
    assert source_hash(HEADER) == source_hash(HEADER.replace("7 s in quick", "9 s in quick").replace("12 s.", "99 s."))
    assert source_hash(HEADER) != source_hash(HEADER.replace("2-core VM with", "4-core VM with"))
    assert source_hash("a") != source_hash("b") and len(source_hash("a")) == 12
    assert time_figures(HEADER) == {"quick": "7", "spawn": "15", "full": "12"} and time_figures("no times") == {}


def test_a_code_cell_may_change_its_comments_only():
    assert same_code(CODE, CODE.replace("# the sum", "# 和").replace("# twice x", "# 两倍\n    # 第二行"))
    assert not same_code(CODE, CODE.replace('"#1"', '"#2"'))  # a string is code, even with a '#'
    assert not same_code(CODE, CODE.replace("x + x", "x * 2"))
    assert not same_code(CODE, CODE.replace("{LAB}/lab99.py", "{LAB}/lab98.py"))  # the magic's line counts
    assert not same_code("%time f()\n", "%timeit f()\n") and same_code("!ls  # list\n", "!ls  # list\n")
    assert same_code("def (:\n", "def (:\n") and not same_code("def (:\n", "def (:  # x\n")  # not Python: equal


def test_the_built_notebook_has_the_translation_the_english_outputs_and_the_measured_times():
    english = _english()
    built = build_translated_notebook(english, _entries(english), "zh")
    sources = {c["id"]: "".join(c["source"]) for c in built["cells"]}
    assert sources["title"] == "# 99 · 求和\n\n**用时：** 快速模式 7 秒，spawn 15 秒，完整 12 秒。"
    assert "# x 的两倍" in sources["build"] and sources["plain"] == "print(1)\n"
    assert [c["id"] for c in built["cells"]] == [c["id"] for c in english["cells"]]
    assert built["cells"][1]["outputs"] == english["cells"][1]["outputs"] and built["metadata"]["language"] == "zh"
    assert "".join(english["cells"][0]["source"]) == HEADER  # the English notebook is left as it was
    assert translation_problems(english, _entries(english), "99.ipynb") == []


def test_each_problem_is_named_with_its_cell_and_a_stale_or_wrong_entry_leaves_the_english_text():
    english = _english()
    entries = _entries(english)
    entries["why"] = Entry("why", "0" * 12, "旧的译文")
    entries["build"] = Entry("build", entries["build"].en_hash, CODE.replace("x + x", "2 * x"), code=True)
    entries["gone"] = Entry("gone", "1" * 12, "?")
    entries["title"] = Entry("title", entries["title"].en_hash, "# 99 · 求和, no times")
    problems = {(p.cell, p.kind) for p in translation_problems(english, entries, "99.ipynb")}
    assert problems == {("why", "stale"), ("build", "code differs"), ("gone", "no such cell"), ("title", "stale")}
    built = build_translated_notebook(english, entries, "zh")
    assert "".join(built["cells"][2]["source"]) == "".join(english["cells"][2]["source"])
    assert "".join(built["cells"][1]["source"]) == CODE

    del entries["why"]
    entries["plain"] = Entry("plain", source_hash("print(1)\n"), "print(1)\n")  # a markdown entry for code
    entries["title"] = Entry("title", entries["title"].en_hash, "x {quick} {spawn} {full}", todo=True)
    problems = {(p.cell, p.kind) for p in translation_problems(english, entries, "99.ipynb")}
    assert {("why", "missing"), ("plain", "wrong kind"), ("title", "missing")} <= problems
    assert all("99.ipynb, cell " in str(p) for p in translation_problems(english, entries, "99.ipynb"))


def test_the_file_reads_back_what_was_written_and_rejects_what_it_cannot_read():
    english = _english()
    entries = list(_entries(english).values()) + [Entry("plain", "a" * 12, "x", code=True, todo=True)]
    text = format_translations(entries, "99.ipynb", "zh")
    assert parse_translations(text, "99.md") == {e.cell: e for e in entries}
    with pytest.raises(LabkitError, match="99.md, line 4: cell a is translated twice"):
        parse_translations("<!-- cell=a en=000000000000 -->\nx\n\n<!-- cell=a en=000000000000 -->\ny", "99.md")
    with pytest.raises(LabkitError, match="line 1: .* is not a marker"):
        parse_translations("<!-- cell=a en=00 -->\nx", "99.md")
    with pytest.raises(LabkitError, match="code entry of cell a is not fenced"):
        parse_translations("<!-- cell=a en=000000000000 code -->\nprint(1)\n", "99.md")


_line = st.text(
    st.characters(blacklist_categories=("Cs", "Zl", "Zp"), blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85")
)
_text = st.lists(_line.filter(lambda line: not line.startswith("<!-- cell=")), max_size=6).map("\n".join)


@given(st.lists(st.tuples(st.booleans(), st.booleans(), _text), max_size=5))
def test_any_text_round_trips_through_the_file(specs):
    entries = [
        Entry(f"c{k}", f"{k:012x}", text.strip("\n"), code=code, todo=todo)
        for k, (code, todo, text) in enumerate(specs)
    ]
    text = format_translations(entries, "99.ipynb", "zh")
    assert parse_translations(text, "99.md") == {e.cell: e for e in entries}


def test_todo_marks_what_to_translate_keeps_what_is_current_and_drops_what_is_gone():
    english = _english()
    entries = _entries(english)
    entries["why"] = Entry("why", "0" * 12, "旧的译文")
    entries["gone"] = Entry("gone", "1" * 12, "?")
    del entries["title"]
    todo = todo_entries(english, entries)
    assert [e.cell for e in todo] == ["title", "build", "why"]  # "plain" has no comment to translate
    title, build, why = todo
    assert title.todo and "{quick} s in quick mode" in title.text and title.en_hash == source_hash(HEADER)
    assert build == entries["build"]
    assert why.todo and why.text == "旧的译文" and why.en_hash == source_hash("".join(english["cells"][2]["source"]))


def test_an_edition_is_built_from_its_files_and_checked_against_them(tmp_path):
    course = tmp_path / "notebooks"
    course.mkdir()
    english = _english()
    (course / "99_sums.ipynb").write_text(notebook_text(english), encoding="utf-8")
    state = check_edition(str(course), "zh")
    assert state.out_of_date == ["99_sums.ipynb"] and {p.kind for p in state.problems} == {"missing"}

    path = translation_file(str(course), "zh", "99_sums.ipynb")
    (course / "zh" / "translations").mkdir(parents=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(format_translations(list(_entries(english).values()), "99_sums.ipynb", "zh"))
    assert build_edition(str(course), "zh") == ["99_sums.ipynb"]
    assert check_edition(str(course), "zh").problems == [] and check_edition(str(course), "zh").out_of_date == []
    assert build_edition(str(course), "zh") == []  # nothing changed: nothing written
    built = json.loads((course / "zh" / "99_sums.ipynb").read_text(encoding="utf-8"))
    assert "求和" in "".join(built["cells"][0]["source"])

    (course / "zh" / "99_sums.ipynb").write_text("{}", encoding="utf-8")  # edited by hand
    assert check_edition(str(course), "zh").out_of_date == ["99_sums.ipynb"]
    with pytest.raises(LabkitError, match="no notebooks"):
        check_edition(str(tmp_path / "notebooks" / "zh" / "translations"), "zh")
