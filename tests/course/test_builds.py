import os
import sys

import pytest

from labkit.core.errors import LabkitError
from labkit.course.builds import (
    REFERENCE_FOLDER,
    BuildCheckFailed,
    BuildNotWritten,
    check_build,
    is_reference,
    learner_build,
    learner_piece,
    stubs_left,
)
from labkit.course.learner_modules import learner_folder

STUBBED = '''
def double(x):
    """Twice x."""
    raise NotImplementedError("not written yet: return twice x")


def triple(x):
    raise NotImplementedError('not written yet: return three times x')
'''
WRITTEN = """
def double(x):
    return 2 * x


def triple(x):
    return 3 * x
"""


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("LABKIT_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("LABKIT_GRADING", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in ("lab98_sums", "lab98_sums_reference", "lab05_pack", "lab05_pack_reference"):
        sys.modules.pop(name, None)


def _write(folder, name, text):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{name}.py"), "w", encoding="utf-8") as f:
        f.write(text)


def test_the_stubs_left_are_listed_with_their_tasks():
    assert stubs_left(STUBBED) == ["return twice x", "return three times x"]
    assert stubs_left(WRITTEN) == []


def test_a_written_build_is_the_learner_s_own(lab, capsys):
    _write(learner_folder("98"), "lab98_sums", WRITTEN)
    module = learner_build("98_sums", "lab98_sums")
    assert module.double(4) == 8 and not is_reference(module)
    assert capsys.readouterr().out == ""


def test_a_stubbed_build_is_replaced_by_the_course_s_version_beside_the_notebook_and_says_so(lab, capsys):
    _write(learner_folder("98"), "lab98_sums", STUBBED)
    _write(lab / REFERENCE_FOLDER, "lab98_sums", WRITTEN)
    module = learner_build("98_sums", "lab98_sums")
    assert module.triple(2) == 6 and is_reference(module)
    out = capsys.readouterr().out
    assert "lab98_sums.py: not written yet (return twice x; return three times x)" in out
    assert "course's version" in out


def test_without_a_reference_the_error_says_how_to_get_one(lab, monkeypatch):
    import labkit.course.builds as builds

    monkeypatch.setattr(builds, "clone_root", lambda: None)
    _write(learner_folder("98"), "lab98_sums", STUBBED)
    with pytest.raises(LabkitError, match=r"labkit course --student DIR"):
        learner_build("98_sums", "lab98_sums")


def test_the_check_passes_fails_or_says_not_written(lab, capsys, monkeypatch):
    _write(learner_folder("98"), "lab98_sums", WRITTEN)
    mine = learner_build("98_sums", "lab98_sums")
    check_build(mine.double(3) == 6, "double", mine)
    assert "Check (double): passed." in capsys.readouterr().out
    with pytest.raises(BuildCheckFailed, match=r"check \(double\): not yet: 3 gave 7") as failed:
        check_build(False, "double", mine, why="3 gave 7")
    assert "6" not in str(failed.value)  # the message names the check, never the answer
    _write(learner_folder("98"), "lab98_sums", STUBBED)
    _write(lab / REFERENCE_FOLDER, "lab98_sums", WRITTEN)
    reference = learner_build("98_sums", "lab98_sums")
    capsys.readouterr()
    check_build(True, "double", reference)
    assert "not written yet" in capsys.readouterr().out
    monkeypatch.setenv("LABKIT_GRADING", "1")
    with pytest.raises(BuildNotWritten, match="still the student edition's stub"):
        check_build(True, "double", reference)


def test_a_piece_from_an_earlier_lab_is_the_learner_s_or_that_lab_s_own_cell_written_first(lab):
    piece = learner_piece("05_mmap_packing", "lab05_pack")  # notebook 05 never ran here: its cell writes it
    assert hasattr(piece, "pack_images") and os.path.exists(os.path.join(learner_folder("05"), "lab05_pack.py"))
    with open(os.path.join(learner_folder("05"), "lab05_pack.py"), "a") as f:
        f.write("\nEDITED = True\n")  # the learner's own edit is what later labs get
    assert learner_piece("05_mmap_packing", "lab05_pack").EDITED is True
    with pytest.raises(LabkitError, match="run notebook 05_mmap_packing first"):
        learner_piece("05_mmap_packing", "lab05_nothing")


def test_a_piece_still_stubbed_is_the_course_s_from_the_clone_s_notebook(lab):
    _write(
        learner_folder("05"),
        "lab05_pack",
        'def pack_images(*a):\n    raise NotImplementedError("not written yet: pack")\n',
    )
    piece = learner_piece("05_mmap_packing", "lab05_pack")
    assert is_reference(piece) and "NotImplementedError" not in open(piece.__file__).read()
