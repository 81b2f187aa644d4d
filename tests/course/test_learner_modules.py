import json
import multiprocessing
import os
import sys

import pytest
from torch.utils.data import DataLoader

from labkit.core.errors import LabkitError
from labkit.course.learner_modules import learner_folder, load_learner_module, written_by

MODULE = """
from torch.utils.data import Dataset


class Squares(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i * i * FACTOR


FACTOR = {factor}
"""


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield "test-lab"
    sys.modules.pop("lab_test_squares", None)


def test_the_folder_is_under_the_data_folder_and_first_on_the_path(lab, tmp_path):
    folder = learner_folder(lab)
    assert folder == os.path.join(str(tmp_path), "learner", lab) and os.path.isdir(folder)
    assert sys.path[0] == folder
    learner_folder(lab)
    assert sys.path.count(folder) == 1
    for bad in ("", "..", "a/b"):
        with pytest.raises(LabkitError, match="a plain name"):
            learner_folder(bad)


def test_an_edited_module_is_reloaded_and_spawned_workers_import_it(lab):
    path = os.path.join(learner_folder(lab), "lab_test_squares.py")
    with open(path, "w") as f:
        f.write(MODULE.format(factor=1))
    assert load_learner_module("lab_test_squares").Squares()[3] == 9
    with open(path, "w") as f:
        f.write(MODULE.format(factor=10))
    os.utime(path, (os.path.getmtime(path) + 5,) * 2)  # a new mtime, even on a coarse clock
    squares = load_learner_module("lab_test_squares").Squares()
    assert squares[3] == 90
    loader = DataLoader(
        squares, batch_size=None, num_workers=1, multiprocessing_context=multiprocessing.get_context("spawn")
    )
    assert [int(x) for x in loader] == [0, 10, 40, 90]


def _cell(source):
    return {"cell_type": "code", "metadata": {}, "outputs": [], "source": source.splitlines(keepends=True)}


def test_a_module_written_in_steps_is_every_step_in_order_and_a_fresh_write_starts_it_again(tmp_path):
    cells = [
        _cell("%%writefile {LAB}/lab99_steps.py\nA = 1"),
        _cell("%%writefile -a {LAB}/lab99_other.py\nOTHER = 1\n"),
        _cell("%%writefile -a {LAB}/lab99_steps.py\nB = 2\n"),
    ]
    path = tmp_path / "99_steps.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert (
        written_by("99_steps", str(path), "lab99_steps") == "A = 1\nB = 2\n"
    )  # IPython ends each cell's text with a newline
    cells.append(_cell("%%writefile {LAB}/lab99_steps.py\nC = 3\n"))
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    assert written_by("99_steps", str(path), "lab99_steps") == "C = 3\n"
    with pytest.raises(LabkitError, match="lab99_none.py"):
        written_by("99_steps", str(path), "lab99_none")
