"""One verdict for a measured claim: the ratio, the spread of the passes behind it, and held / did not hold /
within noise, decided from both, so a 1.02x never reads as a win.

Every notebook and `labkit ablation` say what a measurement means through `judge`: the same rule
everywhere, and a rule that can fail. A claim expects the candidate to be ``"better"`` than the baseline
(faster: more images/s, or less time), ``"worse"``, or ``"same"``. Where the article gives a size, the verdict
also says whether that size was met (within the spread), exceeded (a larger effect than the article's, beyond the
spread) or missed (a smaller one), not only the direction. A goal is a floor, not a point: it is reached only
when the median ratio is at or above it, and the text says where the spread straddles it.

The spread is the widest the passes allow: the worst candidate pass over the best baseline pass, up to the
best over the worst. A claim "held" only when even that worst pairing points its way and the median
ratio clears ``min_effect``; it "did not hold" when even the best pairing misses ``min_effect``;
anything in between is "within noise", and the text says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from labkit.core.errors import LabkitValueError

HELD = "held"
NOT_HELD = "did not hold"
NOISE = "within noise"
Expect = Literal["better", "worse", "same"]
#: The smallest change counted as one: 5 % (pass-to-pass spread on a quiet 2-core VM is 2-10 %).
MIN_EFFECT = 0.05


@dataclass(frozen=True)
class Verdict:
    """What a claim's measurement says. ``ratio`` is candidate / baseline as "how many times better" (for
    times: baseline time / candidate time), ``low``..``high`` its spread over the passes."""

    claim: str
    expect: str
    ratio: float
    low: float
    high: float
    outcome: str
    passes: tuple
    size: float | None = None
    size_from: str = "the article measured"
    size_outcome: str | None = None
    goal: float | None = None
    goal_outcome: str | None = None
    unit: str = "passes"  #: what a side's repeats are, for the text: "passes" of a loader, "seeds" of a training run

    @property
    def held(self) -> bool:
        return self.outcome == HELD

    def __str__(self) -> str:
        spread = f"{self.low:.2f}-{self.high:.2f}x over {self.passes[0]} + {self.passes[1]} {self.unit}"
        text = f"Verdict: {self.claim}: {self.outcome} ({self.ratio:.2f}x, {spread})"
        if self.size is not None:
            text += f"; {self.size_from} {self.size:.2f}x: that size {self.size_outcome}"
        if self.goal is not None:
            text += f"; the goal is at least {self.goal:.2f}x: {self.goal_outcome}"
        return text


def ratios(baseline: Sequence[float], candidate: Sequence[float], higher_is_better: bool = True) -> tuple:
    """(median ratio, lowest, highest) of candidate over baseline, as "times better"."""
    if len(baseline) < 1 or len(candidate) < 1 or min(*baseline, *candidate) <= 0:
        raise LabkitValueError(
            "each side needs at least one positive measurement, got "
            f"baseline={list(baseline)}, candidate={list(candidate)}"
        )
    if not higher_is_better:  # times: the faster side has the smaller number
        baseline, candidate = [1 / t for t in baseline], [1 / t for t in candidate]
    ratio = statistics.median(candidate) / statistics.median(baseline)
    return ratio, min(candidate) / max(baseline), max(candidate) / min(baseline)


def judge(
    claim: str,
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    expect: Expect = "better",
    higher_is_better: bool = True,
    size: float | None = None,
    size_from: str = "the article measured",
    min_effect: float = MIN_EFFECT,
    goal: float | None = None,
    unit: str = "passes",
) -> Verdict:
    """The verdict on ``claim`` from repeated passes of the baseline and the candidate (images/s, or seconds
    with ``higher_is_better=False``). ``size`` is the ratio the article gives, if any (``size_from`` words its
    source). ``goal``: the least ratio wanted, reached when the median is at or above it. ``unit``: what the
    repeats are, as the text names them ("passes"; "seeds" for training runs).

    Needs two or more passes a side: one pass has no spread, and a verdict without one could not fail.
    """
    if len(baseline) < 2 or len(candidate) < 2:
        raise LabkitValueError(
            f"{claim!r}: a verdict needs at least 2 passes of each side to know its noise, got "
            f"{len(baseline)} and {len(candidate)}; measure more runs"
        )
    if expect not in ("better", "worse", "same"):
        raise LabkitValueError(f"expect={expect!r}: one of 'better', 'worse', 'same'")
    ratio, low, high = ratios(baseline, candidate, higher_is_better)
    up, down = 1 + min_effect, 1 / (1 + min_effect)
    if expect == "better":
        outcome = HELD if low > 1 and ratio >= up else NOT_HELD if high < up else NOISE
    elif expect == "worse":
        outcome = HELD if high < 1 and ratio <= down else NOT_HELD if low > down else NOISE
    else:  # "same": held when the whole spread stays within min_effect either side
        outcome = HELD if down <= low and high <= up else NOT_HELD if low > up or high < down else NOISE
    size_outcome = None
    if size is not None:
        if size <= 0:
            raise LabkitValueError(f"size={size}: a ratio, above 0")
        # a size is an effect: "exceeded" is a larger one than the article's in the claim's direction, "missed" less
        larger, smaller = (
            (size < low / up, size > high * up) if expect != "worse" else (size > high * up, size < low / up)
        )
        if larger:
            size_outcome = f"was exceeded (here {ratio:.2f}x)"
        elif smaller:
            size_outcome = f"was missed (here {ratio:.2f}x)"
        else:
            size_outcome = "was met" if outcome == HELD else "is within this run's spread"
    return Verdict(
        claim,
        expect,
        ratio,
        low,
        high,
        outcome,
        (len(baseline), len(candidate)),
        size,
        size_from,
        size_outcome,
        goal,
        None if goal is None else goal_outcome(ratio, low, high, goal),
        unit,
    )


def goal_outcome(ratio: float, low: float, high: float, goal: float) -> str:
    """ "reached" or "not reached (here 1.64x)", and where the spread straddles the goal, so."""
    if goal <= 0:
        raise LabkitValueError(f"goal={goal}: a ratio, above 0")
    if ratio >= goal:
        return "reached" + (f", though the spread reaches below it ({low:.2f}x)" if low < goal else "")
    return f"not reached (here {ratio:.2f}x)" + (
        f", though the spread reaches it ({high:.2f}x)" if high >= goal else ""
    )
