"""Self-checks for the course's exercises: a learner writes an answer into a variable, and a cell says whether it is
right, from what this run measured or computed, without showing the answer.

An answer not given yet (``None``) is not a failure: the cell says what to fill in (while an instructor grades,
``LABKIT_GRADING=1``, it is one). A wrong one raises `AnswerNotYet`, so the check could fail, and a stored notebook
(run with every answer ``None``) still runs top to bottom.
"""

from __future__ import annotations

import math
from typing import Any

from labkit.core.errors import LabkitError
from labkit.course.builds import grading


class AnswerNotYet(LabkitError, AssertionError):
    """The answer written is not the one this run gives; the message says what was checked, never the answer."""


def _matches(answer: Any, expected: Any, rel: float) -> bool:
    if isinstance(expected, bool) or isinstance(answer, bool):
        return answer is expected
    if isinstance(expected, (int, float)) and isinstance(answer, (int, float)):
        return math.isclose(answer, expected, rel_tol=rel, abs_tol=0 if rel else 1e-9)
    if isinstance(expected, (set, frozenset)):
        return set(answer) == expected
    return answer == expected


def check_answer(answer: Any, expected: Any, what: str, rel: float = 0.0, hint: str = "") -> None:
    """Check ``answer`` against ``expected`` (numbers within the relative tolerance ``rel``; sets in any order):
    prints "correct", or, for ``None``, what to fill in; a wrong answer raises `AnswerNotYet` naming ``what`` and
    the ``hint``. Returns nothing, so a notebook cell that ends with the call shows only the printed line."""
    if answer is None:
        if grading():
            raise AnswerNotYet(f"{what}: not answered")
        print(f"Self-check ({what}): not answered yet: put your answer in the variable above and run this cell again.")
        return
    if not _matches(answer, expected, rel):
        raise AnswerNotYet(
            f"{what}: {answer!r} is not what this run gives"
            + (f"; {hint}" if hint else "")
            + " (the exercise's solution shows the way)"
        )
    print(f"Self-check ({what}): correct.")
