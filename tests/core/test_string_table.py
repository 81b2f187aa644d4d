import os
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from labkit.core.string_table import StringTable


@given(st.lists(st.binary(max_size=40), max_size=50))
def test_round_trips_any_file_name_bytes(names):
    table = StringTable.from_strings(names)
    assert len(table) == len(names)
    assert [table.raw(i) for i in range(len(table))] == names
    assert [os.fsencode(s) for s in table] == names


def test_non_utf8_names_survive_as_openable_str(tmp_path):
    name = b"caf\xe9-\xff.jpg"  # Latin-1, not UTF-8
    table = StringTable.from_strings([name])
    path = os.path.join(os.fsencode(tmp_path), name)
    open(path, "wb").close()
    assert os.path.exists(os.path.join(str(tmp_path), table[0]))


def test_is_two_arrays_however_many_strings():
    table = StringTable.from_strings(f"class/{i:06d}.jpg" for i in range(10_000))
    assert isinstance(table.blob, np.ndarray) and isinstance(table.offsets, np.ndarray)
    assert table[1234] == "class/001234.jpg" and table[-1] == "class/009999.jpg"
    assert pickle.loads(pickle.dumps(table))[42] == table[42]


def test_rejects_offsets_that_do_not_fit_the_blob():
    blob = np.frombuffer(b"abc", np.uint8)
    with pytest.raises(ValueError):
        StringTable(blob, np.array([0, 5]))
    with pytest.raises(ValueError):
        StringTable(blob, np.array([0, 2, 1, 3]))
    with pytest.raises(IndexError):
        StringTable(blob, np.array([0, 3]))[1]


def test_printable_shows_non_utf8_bytes_instead_of_failing():
    from labkit.core.string_table import printable

    name = os.fsdecode(b"caf\xe9.jpg")
    assert printable(name) == "caf\\xe9.jpg" and printable("ok.jpg") == "ok.jpg"
    printable(name).encode("utf-8")  # what print() does on a UTF-8 terminal


@given(st.lists(st.binary(max_size=20), max_size=30), st.data())
def test_take_and_concat_give_the_strings_asked_for(names, data):
    table = StringTable.from_strings(names)
    picks = data.draw(st.lists(st.integers(0, len(names) - 1), max_size=40) if names else st.just([]))
    assert [table.take(picks).raw(i) for i in range(len(picks))] == [names[i] for i in picks]
    cut = data.draw(st.integers(0, len(names)))
    halves = [table.take(range(cut)), table.take(range(cut, len(names)))]
    joined = StringTable.concat(halves)
    assert [joined.raw(i) for i in range(len(joined))] == names
    assert len(StringTable.concat([])) == 0


def test_take_refuses_indices_out_of_range():
    with pytest.raises(IndexError):
        StringTable.from_strings(["a", "b"]).take([2])


@given(st.lists(st.binary(max_size=20), max_size=30))
def test_names_given_as_str_are_stored_as_the_same_bytes(names):
    """`from_strings` encodes str names all at once; a name holding NUL takes the one-by-one path."""
    as_str = [os.fsdecode(n) for n in names]
    table = StringTable.from_strings(as_str)
    assert [table.raw(i) for i in range(len(table))] == names
    assert list(table) == as_str
