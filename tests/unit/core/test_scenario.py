"""`dynalloc.core.scenario.Scenario`'s compute slowdowns: slowdown factors, spans [start, end),
stacking, contention burners, jitter, and a ValueError naming the key for every invalid spec."""

import math
import re

import numpy as np
import pytest
from dynalloc.core.scenario import Change, Scenario
from hypothesis import given, settings
from hypothesis import strategies as st


def test_no_scenario_is_all_ones():
    scenario = Scenario(3)
    assert scenario.slowdown == [1.0, 1.0, 1.0]
    assert scenario.changes == []
    for rank in range(3):
        for iteration in (0, 1, 10**6):
            assert scenario.factor(rank, iteration) == 1.0
            assert scenario.burners(rank, iteration) == 0
            assert scenario.nominal_slowdown(rank, iteration) == 1.0
    assert scenario.static_speeds() == [1.0, 1.0, 1.0]


def test_static_slowdown_applies_at_every_iteration():
    scenario = Scenario(3, [1, 3, 2.5])
    assert scenario.slowdown == [1.0, 3.0, 2.5]
    assert all(isinstance(f, float) for f in scenario.slowdown)
    for iteration in (0, 7, 10**9):
        assert [scenario.factor(r, iteration) for r in range(3)] == [1.0, 3.0, 2.5]
        assert [scenario.nominal_slowdown(r, iteration) for r in range(3)] == [1.0, 3.0, 2.5]
    assert scenario.static_speeds() == [1.0, 1.0 / 3.0, 0.4]


def test_sleep_change_is_active_on_start_end_half_open_span():
    scenario = Scenario(2, None, [{"rank": 1, "factor": 3, "start": 200, "end": 400}])
    assert [scenario.factor(1, i) for i in (0, 199, 200, 201, 399, 400, 401)] == [
        1.0, 1.0, 3.0, 3.0, 3.0, 1.0, 1.0,
    ]  # fmt: skip
    assert all(scenario.factor(0, i) == 1.0 for i in (0, 199, 200, 399, 400))
    # A change does not alter the static speeds that the oracle uses.
    assert scenario.static_speeds() == [1.0, 1.0]


def test_end_none_lasts_forever():
    scenario = Scenario(2, [2, 1], [{"rank": 0, "factor": 1.5, "start": 10, "end": None}])
    assert scenario.factor(0, 9) == 2.0
    assert scenario.factor(0, 10) == 3.0
    assert scenario.factor(0, 10**12) == 3.0
    assert scenario.factor(1, 10**12) == 1.0


def test_change_defaults():
    scenario = Scenario(1, None, [{"rank": 0, "start": 0, "end": 5}])
    assert scenario.changes == [
        Change(rank=0, start=0, end=5, mode="sleep", factor=1.0, processes=1)
    ]
    assert scenario.factor(0, 0) == 1.0


def test_factors_stack_multiplicatively():
    scenario = Scenario(
        2,
        [2, 1],
        [
            {"rank": 0, "factor": 3, "start": 5, "end": 15},
            {"rank": 0, "factor": 1.5, "start": 10, "end": None},
            {"rank": 1, "factor": 4, "start": 0, "end": 1},
        ],
    )
    assert scenario.factor(0, 0) == 2.0
    assert scenario.factor(0, 5) == 6.0
    assert scenario.factor(0, 10) == 9.0
    assert scenario.factor(0, 15) == 3.0
    assert scenario.factor(1, 0) == 4.0
    assert scenario.factor(1, 1) == 1.0


def test_contention_burners_and_nominal_slowdown():
    scenario = Scenario(
        3,
        [1, 2, 1],
        [
            {"rank": 0, "mode": "contention", "processes": 1, "start": 100, "end": 300},
            {"rank": 0, "mode": "contention", "processes": 2, "start": 200, "end": None},
            {"rank": 1, "mode": "contention", "processes": 3, "start": 0, "end": 10},
            {"rank": 0, "mode": "sleep", "factor": 2, "start": 250, "end": 260},
        ],
    )
    assert [scenario.burners(0, i) for i in (99, 100, 199, 200, 299, 300, 10**6)] == [
        0, 1, 1, 3, 3, 2, 2,
    ]  # fmt: skip
    # Contention does not change the sleep factor; the logged slowdown counts the burners.
    assert scenario.factor(0, 200) == 1.0
    assert scenario.nominal_slowdown(0, 99) == 1.0
    assert scenario.nominal_slowdown(0, 100) == 2.0
    assert scenario.nominal_slowdown(0, 200) == 4.0
    assert scenario.nominal_slowdown(0, 255) == 2.0 * 4.0
    assert scenario.nominal_slowdown(0, 300) == 3.0
    assert scenario.burners(1, 5) == 3
    assert scenario.nominal_slowdown(1, 5) == 2.0 * 4.0
    assert scenario.nominal_slowdown(1, 10) == 2.0
    assert all(scenario.burners(2, i) == 0 for i in (0, 100, 200, 10**6))


def test_contention_factor_is_ignored():
    scenario = Scenario(
        1, None, [{"rank": 0, "mode": "contention", "factor": 5, "start": 0, "end": None}]
    )
    assert scenario.factor(0, 3) == 1.0
    assert scenario.burners(0, 3) == 1


spans = st.tuples(
    st.integers(0, 3),  # rank
    st.integers(0, 50),  # start
    st.one_of(st.none(), st.integers(1, 60)),  # length, None = forever
    st.sampled_from([1.0, 1.25, 2.0, 3.0]),  # factor
    st.sampled_from(["sleep", "contention"]),
    st.integers(1, 3),  # processes
)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([1.0, 1.5, 2.0, 4.0]), min_size=4, max_size=4),
    st.lists(spans, max_size=6),
)
def test_factor_burners_and_nominal_agree_with_a_direct_model(slowdown, drawn):
    specs = [
        {
            "rank": r,
            "start": s,
            "end": None if n is None else s + n,
            "factor": f,
            "mode": m,
            "processes": p,
        }
        for r, s, n, f, m, p in drawn
    ]
    scenario = Scenario(4, slowdown, specs)
    for rank in range(4):
        for iteration in range(0, 120, 3):
            live = [
                c for c in specs
                if c["rank"] == rank and c["start"] <= iteration
                and (c["end"] is None or iteration < c["end"])
            ]  # fmt: skip
            factor = math.prod([c["factor"] for c in live if c["mode"] == "sleep"]) * slowdown[rank]
            burners = sum(c["processes"] for c in live if c["mode"] == "contention")
            assert scenario.factor(rank, iteration) == pytest.approx(factor, rel=1e-12)
            assert scenario.burners(rank, iteration) == burners
            assert scenario.nominal_slowdown(rank, iteration) == pytest.approx(
                factor * (1 + burners), rel=1e-12
            )


DROP = object()


def valid(**overrides):
    spec = {"rank": 1, "start": 10, "end": 20, "factor": 2}
    spec.update(overrides)
    return {k: v for k, v in spec.items() if v is not DROP}


@pytest.mark.parametrize(
    ("slowdown", "changes", "key"),
    [
        # A rank that does not exist (ranks=2).
        (None, [valid(rank=5)], "scenario.changes[0].rank"),
        (None, [valid(rank=2)], "scenario.changes[0].rank"),
        (None, [valid(rank=-1)], "scenario.changes[0].rank"),
        (None, [valid(rank="1")], "scenario.changes[0].rank"),
        (None, [valid(rank=1.0)], "scenario.changes[0].rank"),
        (None, [valid(), valid(rank=7)], "scenario.changes[1].rank"),
        # Unknown and missing keys.
        (None, [valid(speed=2)], "scenario.changes[0]: unknown key 'speed'"),
        (None, [valid(rank=DROP)], "scenario.changes[0]"),
        (None, [valid(start=DROP)], "scenario.changes[0]"),
        # Not a mapping.
        (None, [[1, 0, 5]], "scenario.changes[0] must be a mapping"),
        (None, ["rank 1"], "scenario.changes[0] must be a mapping"),
        # Mode.
        (None, [valid(mode="burn")], "scenario.changes[0].mode"),
        (None, [valid(mode=None)], "scenario.changes[0].mode"),
        # Span.
        (
            None,
            [valid(start=20, end=20)],
            "scenario.changes[0].end must be an iteration after start",
        ),
        (
            None,
            [valid(start=30, end=20)],
            "scenario.changes[0].end must be an iteration after start",
        ),
        (None, [valid(start=-1, end=20)], "scenario.changes[0].start must be an iteration >= 0"),
        (None, [valid(start=-1, end=None)], "scenario.changes[0].start must be an iteration >= 0"),
        # Factor.
        (None, [valid(factor=0.5)], "scenario.changes[0].factor"),
        (None, [valid(factor=0)], "scenario.changes[0].factor"),
        (None, [valid(factor=-2)], "scenario.changes[0].factor"),
        (None, [valid(factor=float("nan"))], "scenario.changes[0].factor"),
        # Processes.
        (None, [valid(mode="contention", processes=0)], "scenario.changes[0].processes"),
        (None, [valid(mode="contention", processes=-1)], "scenario.changes[0].processes"),
        (None, [valid(mode="contention", processes=1.5)], "scenario.changes[0].processes"),
        (None, [valid(mode="contention", processes="2")], "scenario.changes[0].processes"),
        # Static slowdown.
        ([1, 2, 3], (), "scenario.slowdown"),
        ([1], (), "scenario.slowdown"),
        ([], (), "scenario.slowdown"),
        ([1, 0.5], (), "scenario.slowdown"),
        ([0, 1], (), "scenario.slowdown"),
        ([1, float("nan")], (), "scenario.slowdown"),
    ],
)
def test_invalid_specs_raise_value_error_naming_the_key(slowdown, changes, key):
    with pytest.raises(ValueError, match=re.escape(key)):
        Scenario(2, slowdown, changes)


def test_missing_key_is_named():
    with pytest.raises(ValueError, match=r"scenario\.changes\[0\].*'start'"):
        Scenario(2, None, [{"rank": 0, "end": 5}])
    with pytest.raises(ValueError, match=r"scenario\.changes\[0\].*'rank'"):
        Scenario(2, None, [{"start": 0, "end": 1}])


def test_omitted_end_lasts_forever():
    scenario = Scenario(2, None, [{"rank": 1, "factor": 2, "start": 3}])
    assert scenario.changes[0].end is None
    assert [scenario.factor(1, i) for i in (2, 3, 10**9)] == [1.0, 2.0, 2.0]


def test_valid_boundary_specs_pass():
    scenario = Scenario(
        2,
        [1, 1],
        [
            valid(rank=0, start=0, end=1, factor=1),
            valid(rank=1, mode="contention", processes=1, factor=0.5),  # factor unused
        ],
    )
    assert len(scenario.changes) == 2
    assert scenario.factor(0, 0) == 1.0
    assert scenario.burners(1, 10) == 1


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        (valid(start="10"), "scenario.changes[0]"),
        (valid(start=None), "scenario.changes[0]"),
        (valid(factor="3"), "scenario.changes[0].factor"),
    ],
)
def test_non_numeric_span_or_factor_raises_value_error(spec, key):
    with pytest.raises(ValueError, match=re.escape(key)):
        Scenario(2, None, [spec])


@pytest.mark.parametrize("slowdown", [3, [None, 1], "ab"])
def test_non_list_slowdown_raises_value_error_naming_the_key(slowdown):
    with pytest.raises(ValueError, match=re.escape("scenario.slowdown")):
        Scenario(2, slowdown)


@pytest.mark.parametrize(
    ("slowdown", "changes", "key"),
    [
        (None, [valid(factor=float("inf"))], "scenario.changes[0].factor"),
        ([1, float("inf")], (), "scenario.slowdown"),
    ],
)
def test_infinite_factor_raises(slowdown, changes, key):
    with pytest.raises(ValueError, match=re.escape(key)):
        Scenario(2, slowdown, changes)


def test_jitter_draws_each_factor_from_its_range_the_same_way_every_time():
    scenario = Scenario(2, [1, 2], jitter=0.3)
    factors = np.array([[scenario.factor(r, i) for i in range(2000)] for r in range(2)])
    assert factors[0].min() >= 1.0 and factors[0].max() <= 1.6
    assert factors[1].min() >= 2.0 and factors[1].max() <= 3.2
    assert abs(factors[0].mean() - 1.3) < 0.02 and factors[0].std() > 0.15
    assert not np.allclose(factors[0], factors[1] / 2)  # each rank draws its own noise
    again = Scenario(2, [1, 2], jitter=0.3)
    assert [again.factor(0, i) for i in range(50)] == list(factors[0][:50])


@pytest.mark.parametrize("jitter", [-0.1, 1.0, "0.3", True, float("nan")])
def test_invalid_jitter_is_named(jitter):
    with pytest.raises(ValueError, match="scenario.jitter"):
        Scenario(2, jitter=jitter)


def test_another_jitter_draw_is_other_noise_from_the_same_range():
    usual, other = Scenario(2, [1, 2], jitter=0.3), Scenario(2, [1, 2], jitter=0.3, jitter_draw=3)
    a, b = ([[s.factor(r, i) for r in range(2)] for i in range(500)] for s in (usual, other))
    a, b = np.array(a), np.array(b)
    assert np.all(a != b) and abs(np.corrcoef(a[:, 0], b[:, 0])[0, 1]) < 0.15
    scaled = b / [1, 2]  # each rank's own slowdown times a draw from [1, 1.6]
    assert scaled.min() >= 1.0 and scaled.max() <= 1.6 and abs(scaled.mean() - 1.3) < 0.03
    assert Scenario(2, [1, 2], jitter=0.3, jitter_draw=0).factor(1, 7) == usual.factor(1, 7)


@pytest.mark.parametrize("draw", [-1, 1.5, "2", True])
def test_invalid_jitter_draw_is_named(draw):
    with pytest.raises(ValueError, match="scenario.jitter_draw"):
        Scenario(2, jitter=0.3, jitter_draw=draw)
