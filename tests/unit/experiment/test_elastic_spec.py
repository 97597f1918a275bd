"""`elastic` in a run config (`experiment.elastic_spec`): its keys checked in one line naming
the key, and the run config of the ranks that survive a loss."""

import pytest
from dynalloc.errors import DynallocError
from dynalloc.experiment.elastic_spec import check_elastic, for_survivors


def test_defaults_allow_no_restart():
    assert check_elastic(None, 4) == {"min_ranks": None, "max_ranks": None, "max_restarts": 0}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"min_ranks": 5}, "config key 'elastic.min_ranks' is 5, but the run has 4 ranks"),
        ({"min_ranks": 0}, "config key 'elastic.min_ranks' is 0"),
        ({"max_restarts": -1}, "config key 'elastic.max_restarts' must be 0 or more, got -1"),
        ({"max_restarts": 1.5}, "config key 'elastic.max_restarts' must be a whole number"),
        ({"max_restarts": True}, "config key 'elastic.max_restarts' must be a whole number"),
        ({"max_ranks": 3}, "config key 'elastic.max_ranks' is 3, below the run's 4 ranks"),
        ({"min_rank": 2}, "config key 'elastic.min_rank' is unknown; known: min_ranks"),
        ([2], "config key 'elastic' must be a mapping, got [2]"),
    ],
)
def test_a_bad_section_names_its_key(section, message):
    with pytest.raises(DynallocError, match="^" + message.replace("[", r"\[").replace("]", r"\]")):
        check_elastic(section, 4)


def test_the_pipeline_names_its_own_key():
    with pytest.raises(DynallocError, match="'training.elastic.min_ranks' is 3"):
        check_elastic({"min_ranks": 3}, 2, where="training.elastic")


def test_survivors_keep_their_own_per_rank_entries_and_scenario_changes():
    raw = {
        "scenario": {
            "slowdown": [1, 2, 3, 4],
            "read_slowdown": [1, 1, 5, 1],
            "changes": [{"rank": 1, "factor": 3, "start": 5}, {"rank": 3, "factor": 2, "start": 0}],
            "jitter": 0.1,
        },
        "min_share": [1, 2, 3, 4],
        "max_share": 40,
        "policy": {"name": "static", "speeds": [1, 2, 3, 4]},
    }
    config = for_survivors(raw, [0, 2, 3])
    assert config["scenario"] == {
        "slowdown": [1, 3, 4],
        "read_slowdown": [1, 5, 1],
        "changes": [{"rank": 2, "factor": 2, "start": 0}],
        "jitter": 0.1,
    }
    assert config["min_share"] == [1, 3, 4] and config["max_share"] == 40
    assert config["policy"] == {"name": "static", "speeds": [1, 3, 4]}
    assert raw["scenario"]["slowdown"] == [1, 2, 3, 4], "the original config was changed"


def test_adaptive_survivors_start_from_their_costs_and_drop_a_warm_start_of_the_old_ranks():
    costs = {"intercept_s": [0.1, 0.2], "per_sample_s": [0.01, 0.03], "noise": 0.05}
    raw = {"policy": {"name": "adaptive", "warm_start": "runs/earlier"}}
    assert for_survivors(raw, [1, 2], costs)["policy"] == {"name": "adaptive", "warm_start": costs}
    assert for_survivors(raw, [1, 2])["policy"] == {"name": "adaptive"}
    probe = {"policy": {"name": "adaptive", "warm_start": "probe"}}
    assert for_survivors(probe, [0])["policy"]["warm_start"] == "probe"
    given = {"policy": {"name": "adaptive", "warm_start": {"intercept_s": [1, 2, 3],
                                                           "per_sample_s": [4, 5, 6]}}}  # fmt: skip
    assert for_survivors(given, [2, 0])["policy"]["warm_start"] == {
        "intercept_s": [3, 1], "per_sample_s": [6, 4]}  # fmt: skip
