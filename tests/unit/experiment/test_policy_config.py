"""The run config's `policy`: a known name, its parameters and their values checked, each
policy's defaults, and the oracle's speeds taken from the scenario's static slowdown."""

import pytest
from dynalloc.core.policies import POLICIES
from dynalloc.experiment.run_config import resolve
from run_configs import base, fails


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"forgetting": "0.9"}, "forgetting"),
        ({"forgetting": 1.5}, "forgetting"),
        ({"confirm": 0}, "confirm"),
        ({"settle": -1}, "settle"),
        ({"sums": [1]}, "no parameter 'sums'"),
        ({"drift_slack": -1}, "drift_slack must be"),
        ({"drifting": [1]}, "no parameter 'drifting'"),
    ],
)
def test_adaptive_parameters_are_checked(params, fragment):
    fails(base(policy={"name": "adaptive", **params}), fragment)


def test_unknown_policy_lists_the_known_ones():
    message = fails(base(policy={"name": "fastest"}), "'fastest'", "policy.name")
    assert set(POLICIES) == {"static", "proportional", "dbs", "controller", "oracle", "adaptive"}
    for name in POLICIES:
        assert name in message


def test_policy_without_name():
    fails(base(policy={"gain": 0.5}), "policy.name", "None")


@pytest.mark.parametrize("value", ["adaptive", None, ["adaptive"]])
def test_policy_must_be_a_mapping(value):
    fails(base(policy=value), "'policy'", "mapping")


@pytest.mark.parametrize("name", sorted(set(POLICIES) - {"oracle"}))
def test_every_policy_resolves_without_parameters(name):
    assert resolve(base(policy={"name": name}), 3)["policy"] == {"name": name}


@pytest.mark.parametrize(
    ("policy", "fragment"),
    [
        ({"name": "static", "gain": 0.5}, "gain"),
        ({"name": "controller", "gian": 0.5}, "gian"),
        ({"name": "proportional", "dead_band": 0.1}, "dead_band"),
        ({"name": "adaptive", "forgeting": 0.9}, "forgeting"),
    ],
)
def test_unknown_policy_parameter(policy, fragment):
    fails(base(policy=policy), "policy", fragment)


@pytest.mark.parametrize(
    ("policy", "fragment"),
    [
        ({"name": "controller", "gain": 2}, "gain"),
        ({"name": "controller", "dead_band": 1}, "dead_band"),
        ({"name": "adaptive", "dead_band": -0.1}, "dead_band"),
        ({"name": "adaptive", "significance": 0}, "significance=0"),
        ({"name": "adaptive", "significance": 1.5}, "significance=1.5"),
        ({"name": "oracle", "speeds": [1.0]}, "speed"),
        ({"name": "oracle", "speeds": [1.0, 0.0]}, "speeds"),
    ],
)
def test_bad_policy_parameter_values(policy, fragment):
    fails(base(policy=policy), "policy", fragment)


def test_oracle_takes_speeds_from_the_static_slowdown():
    config = resolve(base(policy={"name": "oracle"}, scenario={"slowdown": [1, 4, 2]}), 3)
    assert config["policy"] == {"name": "oracle", "speeds": [1.0, 0.25, 0.5]}


def test_oracle_without_slowdown_gets_equal_speeds():
    assert resolve(base(policy={"name": "oracle"}), 2)["policy"]["speeds"] == [1.0, 1.0]


def test_oracle_keeps_given_speeds():
    policy = {"name": "oracle", "speeds": [2.0, 1.0]}
    config = resolve(base(policy=policy, scenario={"slowdown": [1, 4]}), 2)
    assert config["policy"]["speeds"] == [2.0, 1.0]


def test_oracle_with_changes_needs_speeds():
    changes = [{"rank": 1, "factor": 3, "start": 10, "end": 20}]
    fails(base(policy={"name": "oracle"}, scenario={"changes": changes}), "policy.speeds")
    given = base(policy={"name": "oracle", "speeds": [1, 1]}, scenario={"changes": changes})
    assert resolve(given, 2)["policy"]["speeds"] == [1, 1]
