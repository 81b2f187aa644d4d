import json
import os

import pytest

from labkit.core.environment import usable_cpus
from labkit.core.user_paths import OutputPathError
from labkit.measure.result_files import result_path, write_result


def test_one_naming_rule_checked_before_the_run(tmp_path):
    n = usable_cpus()
    assert result_path("limits", False, folder=str(tmp_path)) == str(tmp_path / f"limits_{n}cpu.json")
    assert result_path("limits", True, folder=str(tmp_path)) == str(tmp_path / f"limits_{n}cpu_quick.json")
    assert result_path("x", True, given=str(tmp_path / "mine.json")) == str(tmp_path / "mine.json")
    with pytest.raises(OutputPathError, match="--json .*mine.json: its folder .*missing does not exist"):
        result_path("x", True, given=str(tmp_path / "missing" / "mine.json"))
    with pytest.raises(OutputPathError, match="the result file"):
        result_path("x", True, folder=str(tmp_path / "missing"))
    assert os.listdir(tmp_path) == []


def test_a_result_is_written_whole_with_the_machine_it_ran_on_first(tmp_path):
    path = str(tmp_path / "r.json")
    write_result(path, {"images_per_s": [1.0, 2.0]})
    written = json.load(open(path))
    assert list(written) == ["machine", "images_per_s"] and written["machine"]["cpu_count"] == usable_cpus()
    write_result(path, {"machine": {"cpu_count": 99}, "x": 1})  # measured by the caller: kept as it was
    assert json.load(open(path)) == {"machine": {"cpu_count": 99}, "x": 1}
    assert os.listdir(tmp_path) == ["r.json"]  # no temporary left beside it
