import pytest

from labkit.core.errors import LabkitError
from labkit.measure.verdict import HELD, NOISE, NOT_HELD, judge, ratios


def test_a_clear_gain_held_and_its_spread_is_the_worst_and_best_pairing():
    v = judge("v2 vs v1", [100, 104, 98], [150, 160, 155])
    assert v.outcome == HELD and v.held
    assert v.ratio == pytest.approx(155 / 100)
    assert (v.low, v.high) == (pytest.approx(150 / 104), pytest.approx(160 / 98))
    assert str(v) == "Verdict: v2 vs v1: held (1.55x, 1.44-1.63x over 3 + 3 passes)"


def test_two_percent_is_never_a_win_however_tight():
    assert judge("x", [100, 100.5], [102, 102.2]).outcome == NOT_HELD  # under MIN_EFFECT even at best
    assert judge("x", [100, 100.5], [102, 102.2], min_effect=0.01).outcome == HELD


def test_overlapping_passes_are_within_noise():
    assert judge("x", [100, 130], [110, 140]).outcome == NOISE


def test_a_reversal_did_not_hold_and_an_expected_slowdown_can_hold():
    assert judge("x", [100, 101], [80, 82]).outcome == NOT_HELD
    assert judge("x", [100, 101], [80, 82], expect="worse").outcome == HELD
    assert judge("x", [100, 101], [99, 100.5], expect="worse").outcome == NOT_HELD


def test_same_holds_only_when_the_whole_spread_stays_close():
    assert judge("x", [100, 101], [100, 102], expect="same").outcome == HELD
    assert judge("x", [100, 101], [130, 131], expect="same").outcome == NOT_HELD
    assert judge("x", [100, 101], [100, 120], expect="same").outcome == NOISE
    assert judge("x", [100, 100.5], [94.5, 95], expect="same").outcome == NOT_HELD  # a steady 5 % loss is a change


def test_times_are_inverted_so_less_time_is_better():
    v = judge("cached", [0.5, 0.52], [0.25, 0.26], higher_is_better=False)
    assert v.held and v.ratio == pytest.approx(0.51 / 0.255)
    assert ratios([2.0], [1.0], higher_is_better=False)[0] == pytest.approx(2.0)


def test_the_seed_size_is_judged_apart_from_the_direction():
    v = judge("v3 vs v2", [100, 102], [107, 109], size=1.35)
    assert v.held and v.size_outcome == "was missed (here 1.07x)"
    assert str(v).endswith("the article measured 1.35x: that size was missed (here 1.07x)")
    assert judge("v3 vs v2", [100, 102], [130, 140], size=1.35).size_outcome == "was met"
    # a larger effect than the seed's is not a failure to hold: it was exceeded
    assert judge("v2 vs v1", [100, 102], [180, 182], size=1.66).size_outcome == "was exceeded (here 1.79x)"
    # for a slowdown, the larger effect is the smaller ratio
    slower = judge("copy costs", [100, 102], [50, 52], expect="worse", size=0.8)
    assert slower.held and slower.size_outcome == "was exceeded (here 0.50x)"
    assert judge("copy costs", [100, 102], [90, 92], expect="worse", size=0.5).size_outcome == "was missed (here 0.90x)"
    goal = judge("pack vs torchvision", [100, 110], [105, 125], size=2.0, size_from="the goal is")
    assert goal.outcome == NOISE
    assert str(goal).endswith("the goal is 2.00x: that size was missed (here 1.10x)")
    assert judge("x", [100, 130], [110, 140], size=1.2).size_outcome == "is within this run's spread"


def test_one_pass_has_no_noise_and_gets_no_verdict():
    with pytest.raises(LabkitError, match="at least 2 passes"):
        judge("x", [100], [200, 210])
    with pytest.raises(LabkitError, match="positive"):
        ratios([0.0], [1.0])
    with pytest.raises(LabkitError, match="expect"):
        judge("x", [1, 1], [1, 1], expect="faster")  # type: ignore[arg-type]


def test_a_goal_is_a_floor_reached_only_by_the_median():
    from labkit.measure.verdict import judge

    below = judge("fast", [100, 100, 100], [150, 164, 227])  # 1.64x, spread 1.50-2.27x
    assert below.goal is None and below.goal_outcome is None and "goal" not in str(below)
    missed = judge("fast", [100, 100, 100], [150, 164, 227], goal=2.0)
    assert str(missed).endswith(
        "the goal is at least 2.00x: not reached (here 1.64x), though the spread reaches it (2.27x)"
    )
    met = judge("fast", [100, 100, 100], [190, 250, 260], goal=2.0)
    assert met.goal_outcome.startswith("reached") and str(met).endswith(
        "reached, though the spread reaches below it (1.90x)"
    )
    clear = judge("fast", [100, 100], [300, 310], goal=2.0)
    assert str(clear).endswith("the goal is at least 2.00x: reached")
    far = judge("fast", [100, 100], [110, 120], goal=2.0)
    assert str(far).endswith("not reached (here 1.15x)")


def test_the_repeats_are_named_as_what_they_are():
    seeds = judge(
        "block shuffle as accurate as random", [0.80, 0.81, 0.82], [0.80, 0.82, 0.81], expect="same", unit="seeds"
    )
    assert "over 3 + 3 seeds" in str(seeds) and "passes" not in str(seeds)
    assert "over 2 + 2 passes" in str(judge("x", [100, 101], [150, 151]))
