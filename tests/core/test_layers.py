"""labkit.core.layers: the chain's order gives each layer exactly those before it; the readers stand on the chain."""

import pytest

from labkit.core.layers import CHAIN, LAYERS, layer_table, may_import


def test_each_layer_of_the_chain_may_import_exactly_those_before_it():
    for k, layer in enumerate(CHAIN):
        assert may_import(layer) == set(CHAIN[: k + 1])
    assert may_import("core") == {"core"}


def test_the_readers_and_the_users_stand_on_the_whole_chain_and_nothing_imports_course_or_tools():
    assert list(LAYERS)[: len(CHAIN)] == list(CHAIN)
    for package in ("measure", "diagnose", "harness", "course", "tools"):
        assert set(CHAIN) <= may_import(package)
    assert "diagnose" not in may_import("measure") and "harness" not in may_import("diagnose")
    assert not [p for p in LAYERS if p != "tools" and "tools" in may_import(p)]
    assert not [p for p in LAYERS if p not in ("course", "tools") and "course" in may_import(p)]


def test_the_table_shows_every_sub_package_once_with_what_it_may_import():
    rows = layer_table().splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [f"labkit.{p}" for p in LAYERS]
    assert rows[0].endswith("| no other labkit package |") and rows[1].endswith("| core |")


def test_an_unknown_package_is_a_key_error():
    with pytest.raises(KeyError):
        may_import("notebooks")
