import pytest

from labkit.core.errors import LabkitError
from labkit.course.exercise_answers import EXERCISES, check_exercise
from labkit.course.exercises import AnswerNotYet


def test_an_answer_is_checked_against_what_the_exercise_computes_and_the_hint_comes_only_when_wrong(capsys):
    pages = EXERCISES["05.4"].expected()
    check_exercise("05.4", pages)
    assert "correct" in capsys.readouterr().out
    with pytest.raises(AnswerNotYet, match="pages in one batch") as wrong:
        check_exercise("05.4", pages + 1)
    assert str(pages) not in str(wrong.value) and "mmap.PAGESIZE" in str(wrong.value)


def test_an_answer_that_depends_on_the_run_takes_what_the_notebook_measured(capsys):
    check_exercise("01.3", 2.0 * 1.28e6 * 64 / 2**30, per_entry=2.0)
    assert "correct" in capsys.readouterr().out
    check_exercise(
        "09.3",
        "v1 -> v2",
        by_id={"v1": {"images_per_s": 1}, "v2": {"images_per_s": 3}, "v3": {"images_per_s": 4}},
        ids=["v1", "v2", "v3"],
    )
    assert "correct" in capsys.readouterr().out


def test_no_answer_yet_computes_nothing_and_says_what_to_fill_in(capsys):
    check_exercise("01.3", None)  # no per_entry needed until there is an answer to check
    assert "not answered yet" in capsys.readouterr().out


def test_while_grading_no_answer_is_a_failed_check(monkeypatch):
    monkeypatch.setenv("LABKIT_GRADING", "1")
    with pytest.raises(AnswerNotYet, match="not answered"):
        check_exercise("05.4", None)


def test_an_unknown_exercise_lists_the_known_ones():
    with pytest.raises(LabkitError, match="05.4"):
        check_exercise("99.9", 1)


@pytest.mark.parametrize("key", [k for k in EXERCISES if k in ("00.1", "02.2.per_rank", "02.2.twice", "04.3", "08.1")])
def test_the_answers_that_need_no_run_compute(key):
    context = {"workers": 2} if key == "04.3" else {}
    assert EXERCISES[key].expected(**context) is not None
