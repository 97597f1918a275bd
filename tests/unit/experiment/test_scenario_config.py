"""The run config's `scenario`: slowdowns, changes (contention needs pinned cores), jitter and
the reads' slowdowns checked and passed through, one DynallocError naming the key for every bad
entry."""

import pytest
from dynalloc.experiment.run_config import resolve
from run_configs import base, fails


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_contention_needs_pinned_cores():
    changes = [{"rank": 1, "mode": "contention", "start": 0}]
    fails(base(pin_cores=False, scenario={"changes": changes}), "pin_cores")


@pytest.mark.parametrize(
    ("scenario", "fragment"),
    [
        ({"changes": [{"rank": 5, "start": 0, "end": 10, "factor": 2}]},
         "scenario.changes[0].rank"),
        ({"changes": [{"rank": 0, "start": 0, "end": 10, "factor": 2},
                      {"rank": 2, "start": 0, "end": None}]}, "scenario.changes[1].rank"),
        ({"changes": [{"rank": 0, "start": 10, "end": 10}]}, "scenario.changes[0]"),
        ({"changes": [{"rank": 0, "start": 0, "end": 1, "factor": 0.5}]},
         "scenario.changes[0].factor"),
        ({"changes": [{"rank": 0, "start": 0, "end": 1, "mode": "x"}]},
         "scenario.changes[0].mode"),
        ({"changes": [{"rank": 0, "start": 0, "end": 1, "when": 3}]}, "'when'"),
        ({"slowdown": [1, 2, 3]}, "scenario.slowdown"),
        ({"slowdown": [1, 0.5]}, "scenario.slowdown"),
        ({"slowdwn": [1, 2]}, "scenario.slowdwn"),
        ({"jitter": 0.3, "jitter_draw": -2}, "scenario.jitter_draw"),
    ],
)  # fmt: skip
def test_bad_scenario(scenario, fragment):
    fails(base(scenario=scenario), fragment, ranks=2)


def test_valid_scenario_passes_through():
    scenario = {"slowdown": [1, 3], "changes": [{"rank": 1, "factor": 2, "start": 5, "end": None}]}
    config = resolve(base(scenario=scenario), 2)
    assert config["scenario"] == scenario


@pytest.mark.parametrize(
    "scenario",
    [{"changes": [{"rank": 0, "start": "5", "end": 10}]}, {"slowdown": 3}],
)
def test_scenario_type_errors_become_dynalloc_errors(scenario):
    fails(base(scenario=scenario), "scenario")


def test_read_slowdown_and_read_changes_pass_through_and_are_checked():
    scenario = {
        "read_slowdown": [1, 3],
        "changes": [{"rank": 0, "mode": "read", "factor": 2, "start": 0, "end": None}],
    }
    assert resolve(base(scenario=scenario), 2)["scenario"] == scenario
    fails(base(scenario={"read_slowdown": [1, 0.5]}), "scenario.read_slowdown")
    fails(base(scenario={"read_slowdown": [1, 2, 3]}), "scenario.read_slowdown", "2 ranks")
    changes = [{"rank": 1, "mode": "read", "factor": 0.9, "start": 0}]
    fails(base(scenario={"changes": changes}), "scenario.changes[0].factor")
