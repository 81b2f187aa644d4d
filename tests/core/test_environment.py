import pytest

from labkit.core.environment import (
    QUICK_ENV,
    consumer_slot,
    flag,
    quick_mode,
    rank_and_world,
    usable_cpu_ids,
    usable_cpus,
)
from labkit.core.errors import LabkitError


@pytest.mark.parametrize(
    "value, expected", [("1", True), ("yes", True), ("0", False), ("false", False), ("", False), (" No ", False)]
)
def test_a_switch_is_on_unless_it_says_off(value, expected, monkeypatch):
    monkeypatch.setenv("LABKIT_SOMETHING", value)
    assert flag("LABKIT_SOMETHING") is expected


def test_an_unset_switch_takes_its_default(monkeypatch):
    monkeypatch.delenv(QUICK_ENV, raising=False)
    assert quick_mode(default=True) is True and quick_mode() is False


def test_usable_cpus_counts_the_ids():
    assert usable_cpus() == len(usable_cpu_ids()) >= 1


def test_rank_and_world_outside_a_process_group():
    assert rank_and_world() == (0, 1)  # a single process: the whole data set is its share
    assert rank_and_world(1, 4) == (1, 4)
    with pytest.raises(LabkitError, match="initialise torch.distributed"):
        rank_and_world(required=True)  # a sampler that splits data must not guess
    with pytest.raises(ValueError, match=r"rank 4 is not in \[0, 4\)"):
        rank_and_world(4, 4)


def test_consumer_slot_in_the_main_process_is_the_rank():
    assert consumer_slot(2, 3) == (2, 3)


def test_local_rank_and_the_data_folder_are_read_in_one_place(monkeypatch, tmp_path):
    from labkit.core import environment
    from labkit.core.errors import LabkitValueError

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert environment.local_rank() == 0
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert environment.local_rank() == 3
    monkeypatch.setenv("LOCAL_RANK", "three")
    with pytest.raises(LabkitValueError, match="LOCAL_RANK='three' is not a whole number"):
        environment.local_rank()
    monkeypatch.delenv(environment.DATA_ENV, raising=False)
    assert environment.configured_data_folder() is None
    monkeypatch.setenv(environment.DATA_ENV, str(tmp_path / "d"))
    assert environment.configured_data_folder() == str(tmp_path / "d")
