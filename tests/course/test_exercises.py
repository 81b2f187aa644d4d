"""The exercises' self-checks: an answer can pass or fail, and a missing one only says what to fill in."""

import pytest

from labkit.core.errors import LabkitError
from labkit.course.exercises import AnswerNotYet, check_answer


def _passes(capsys, *args, **kwargs):
    assert check_answer(*args, **kwargs) is None  # a cell that ends with the call shows only its line
    return capsys.readouterr().out.endswith("correct.\n")


def test_a_right_answer_passes_and_a_wrong_one_fails_without_showing_the_answer(capsys):
    assert _passes(capsys, 3, 3, "samples per rank")
    with pytest.raises(AnswerNotYet, match="samples per rank: 4 is not what this run gives; count the padding") as err:
        check_answer(4, 3, "samples per rank", hint="count the padding")
    assert "3" not in str(err.value).replace("samples per rank", "") and isinstance(err.value, LabkitError)


def test_numbers_within_the_tolerance_sets_in_any_order_and_booleans_as_such(capsys):
    assert _passes(capsys, 3.02, 3.0, "GiB", rel=0.01)
    with pytest.raises(AnswerNotYet):
        check_answer(3.1, 3.0, "GiB", rel=0.01)
    assert _passes(capsys, [2, 1], {1, 2}, "read twice")
    with pytest.raises(AnswerNotYet):
        check_answer(1, True, "disjoint")  # 1 is not an answer to a yes-or-no question
    assert _passes(capsys, False, False, "disjoint")


def test_no_answer_yet_is_not_a_failure(capsys):
    assert not _passes(capsys, None, 3, "samples per rank")
    check_answer(None, 3, "samples per rank")
    assert "not answered yet" in capsys.readouterr().out
