"""`dynalloc.core.scenario.Scenario`'s slowdowns of the reads of a streamed dataset
(`read_slowdown`, changes of mode `read`): how they stack, kept apart from the compute's (sleep,
contention, jitter), and a ValueError naming the key for every invalid one."""

import re

import pytest
from dynalloc.core.scenario import Scenario


def valid(**overrides):
    """A valid change: rank 1 twice as slow over iterations [10, 20), with `overrides`."""
    return {"rank": 1, "start": 10, "end": 20, "factor": 2, **overrides}


def test_no_read_slowdown_is_all_ones():
    scenario = Scenario(3)
    assert scenario.read_slowdown == [1.0, 1.0, 1.0]
    assert all(scenario.read_factor(r, i) == 1.0 for r in range(3) for i in (0, 10**6))


def test_read_slowdown_and_read_changes_stack_and_leave_compute_alone():
    scenario = Scenario(
        3,
        [2, 1, 1],
        [
            {"rank": 1, "mode": "read", "factor": 3, "start": 10, "end": 20},
            {"rank": 1, "mode": "read", "factor": 1.5, "start": 15, "end": None},
            {"rank": 1, "mode": "sleep", "factor": 4, "start": 0, "end": 100},
            {"rank": 2, "mode": "contention", "processes": 2, "start": 0, "end": None},
        ],
        read_slowdown=[1, 2, 1.25],
    )
    assert scenario.read_slowdown == [1.0, 2.0, 1.25]
    assert all(isinstance(f, float) for f in scenario.read_slowdown)
    assert [scenario.read_factor(1, i) for i in (0, 9, 10, 14, 15, 19, 20, 10**6)] == [
        2.0, 2.0, 6.0, 6.0, 9.0, 9.0, 3.0, 3.0,
    ]  # fmt: skip
    assert scenario.read_factor(0, 15) == 1.0  # sleep factors do not slow the reads
    assert scenario.read_factor(2, 15) == 1.25  # nor do burners
    # ... and reads do not slow the compute, nor count in the nominal slowdown or the oracle's
    assert [scenario.factor(1, i) for i in (0, 15, 100)] == [4.0, 4.0, 1.0]
    assert scenario.nominal_slowdown(1, 15) == 4.0
    assert scenario.nominal_slowdown(2, 15) == 3.0
    assert scenario.static_speeds() == [0.5, 1.0, 1.0]


def test_jitter_does_not_touch_the_reads():
    scenario = Scenario(2, jitter=0.5, read_slowdown=[1, 2])
    assert {scenario.read_factor(1, i) for i in range(100)} == {2.0}
    assert len({scenario.factor(1, i) for i in range(100)}) > 50


@pytest.mark.parametrize(
    ("read_slowdown", "text"),
    [
        ([1, 0.5], "scenario.read_slowdown must be a list of finite factors >= 1"),
        ([0, 1], "scenario.read_slowdown must be"),
        ([1, float("nan")], "scenario.read_slowdown must be"),
        ([1, float("inf")], "scenario.read_slowdown must be"),
        ([1, True], "scenario.read_slowdown must be"),
        ([1, "2"], "scenario.read_slowdown must be"),
        (2, "scenario.read_slowdown must be"),
        ("12", "scenario.read_slowdown must be"),
        ({"1": 2}, "scenario.read_slowdown must be"),
        ([1, 2, 3], "scenario.read_slowdown has 3 factors for 2 ranks"),
        ([1], "scenario.read_slowdown has 1 factors for 2 ranks"),
        ([], "scenario.read_slowdown has 0 factors"),
    ],
)
def test_invalid_read_slowdown_is_named(read_slowdown, text):
    with pytest.raises(ValueError, match=re.escape(text)):
        Scenario(2, read_slowdown=read_slowdown)


@pytest.mark.parametrize(
    ("factor", "text"),
    [
        (0.5, "scenario.changes[0].factor must be a finite number >= 1, got 0.5"),
        (0, "scenario.changes[0].factor"),
        (float("nan"), "scenario.changes[0].factor"),
        (float("inf"), "scenario.changes[0].factor"),
        ("3", "scenario.changes[0].factor"),
        (True, "scenario.changes[0].factor"),
        (None, "scenario.changes[0].factor"),
    ],
)
def test_invalid_read_factor_is_named(factor, text):
    with pytest.raises(ValueError, match=re.escape(text)):
        Scenario(2, None, [valid(mode="read", factor=factor)])


def test_read_changes_check_rank_and_span_like_the_others():
    with pytest.raises(ValueError, match=re.escape("scenario.changes[0].rank 2")):
        Scenario(2, None, [valid(mode="read", rank=2)])
    with pytest.raises(ValueError, match=re.escape("scenario.changes[0].end must be")):
        Scenario(2, None, [valid(mode="read", start=5, end=5)])
    with pytest.raises(ValueError, match="one of sleep, contention, read"):
        Scenario(2, None, [valid(mode="reads")])
    default = Scenario(2, None, [{"rank": 0, "mode": "read", "start": 0}])
    assert default.read_factor(0, 0) == 1.0  # factor 1 by default: no slowdown
