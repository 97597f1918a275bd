"""`dynalloc.experiment.run_config`: defaults, one DynallocError naming the key for every bad
input, the oracle's speeds, the iteration and epoch counts, and loading the YAML file."""

import copy
import re
from pathlib import Path

import pytest
import yaml
from dynalloc.core.policies import POLICIES
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import (
    DEFAULTS,
    load_config,
    planned_epochs,
    resolve,
    total_iterations,
)

DATASET = "staged"


def base(**overrides):
    raw = {"dataset": DATASET}
    raw.update(overrides)
    return raw


def fails(raw, *fragments, ranks=2):
    """Resolve `raw`; it must raise DynallocError whose message contains every fragment."""
    with pytest.raises(DynallocError) as caught:
        resolve(raw, ranks)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_defaults_are_filled(tmp_path):
    config = resolve({"dataset": DATASET}, 4)
    assert set(config) == set(DEFAULTS) | {"ranks"}
    assert config["ranks"] == 4
    assert config["dataset"] == str(tmp_path.resolve() / DATASET)
    for key, value in DEFAULTS.items():
        if key != "dataset":
            assert config[key] == value, key
    # The contract's own defaults.
    assert config["policy"] == {"name": "adaptive"}
    assert config["min_share"] == 1
    assert config["max_share"] is None
    assert config["iterations"] is None
    assert config["target_accuracy"] is None
    assert config["drop_last"] is False


def test_resolve_copies_and_leaves_defaults_and_input_alone():
    before = copy.deepcopy(DEFAULTS)
    raw = base(policy={"name": "oracle"}, scenario={"slowdown": [1, 2], "changes": []})
    raw_before = copy.deepcopy(raw)
    config = resolve(raw, 2)
    config["policy"]["name"] = "changed"
    config["scenario"]["changes"].append("x")
    config["optimizer"]["lr"] = -1
    assert before == DEFAULTS
    assert raw == raw_before
    assert resolve(base(), 2)["optimizer"] == before["optimizer"]


def test_given_values_are_kept():
    raw = base(
        global_batch=64, epochs=3, iterations=10, drop_last=True, min_share=2, max_share=40,
        seed=5, target_accuracy=0.9, pin_cores=False, model="mlp",
        policy={"name": "controller", "gain": 0.3},
    )  # fmt: skip
    config = resolve(raw, 2)
    for key, value in raw.items():
        if key != "dataset":
            assert config[key] == value, key


def test_dataset_path_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve(base(dataset="a/../b"), 1)["dataset"] == str(tmp_path.resolve() / "b")
    assert resolve(base(dataset="~/data"), 1)["dataset"] == str(
        (tmp_path / "home" / "data").resolve()
    )
    assert Path(resolve(base(dataset="/x/y"), 1)["dataset"]) == Path("/x/y").resolve()


def test_unknown_top_level_key():
    message = fails(base(global_bacth=64), "'global_bacth'")
    assert "global_batch" in message  # the known keys are listed


@pytest.mark.parametrize("raw", [{}, {"dataset": None}, {"dataset": ""}])
def test_missing_dataset(raw):
    fails(raw, "'dataset'")


@pytest.mark.parametrize("key", ["global_batch", "epochs"])
@pytest.mark.parametrize("value", [0, -1, 1.5, "8", None, True, [8]])
def test_bad_positive_integers(key, value):
    fails(base(**{key: value}), repr(key), ">= 1")


@pytest.mark.parametrize("key", ["iterations", "max_share"])
@pytest.mark.parametrize("value", [0, -3, 2.5, "5", False])
def test_bad_optional_positive_integers(key, value):
    fails(base(**{key: value}), repr(key), ">= 1")


@pytest.mark.parametrize("value", [-1, 0.5, "0", None, True])
def test_bad_seed(value):
    fails(base(seed=value), "'seed'", ">= 0")


@pytest.mark.parametrize("value", [0, -5, "60", True, float("inf"), [60]])
def test_bad_stall_timeout(value):
    fails(base(stall_timeout=value), "'stall_timeout'", "seconds > 0, or null")


@pytest.mark.parametrize("value", [None, 0.5, 600])
def test_stall_timeout_may_be_seconds_or_null(value):
    assert resolve(base(stall_timeout=value), 2)["stall_timeout"] == value


@pytest.mark.parametrize("value", [0, -1, 0.5, "1", None, True])
def test_min_share_must_give_every_rank_a_sample(value):
    fails(base(min_share=value), "'min_share'", ">= 1")


def test_smallest_integers_accepted():
    config = resolve(
        base(global_batch=2, epochs=1, iterations=1, min_share=1, seed=0, max_share=2), 2
    )
    assert (config["global_batch"], config["iterations"], config["min_share"]) == (2, 1, 1)


def test_per_rank_share_bounds_are_accepted_and_written_as_lists():
    config = resolve(base(global_batch=64, min_share=(1, 8), max_share=[None, 20]), 2)
    assert (config["min_share"], config["max_share"]) == ([1, 8], [None, 20])
    again = resolve(yaml.safe_load(yaml.safe_dump(config)), 2)
    assert again == config
    # One list and one number mix: the number holds for every rank.
    assert resolve(base(global_batch=64, max_share=[40, 40]), 2)["min_share"] == 1


@pytest.mark.parametrize(
    ("key", "value", "fragments"),
    [
        ("max_share", [10, 20, 30], ["config key 'max_share' has 3 entries for 2 ranks"]),
        ("min_share", [1], ["config key 'min_share' has 1 entries for 2 ranks"]),
        ("min_share", [], ["config key 'min_share' has 0 entries for 2 ranks"]),
        ("min_share", [1, 0], ["'min_share'", ">= 1 for every rank", "got 0 for rank 1"]),
        ("min_share", [1, None], ["'min_share'", ">= 1 for every rank", "got None for rank 1"]),
        ("min_share", [True, 1], ["'min_share'", "got True for rank 0"]),
        ("max_share", [None, 0], ["'max_share'", ">= 1 or null", "got 0 for rank 1"]),
        ("max_share", [2.5, None], ["'max_share'", ">= 1 or null", "got 2.5 for rank 0"]),
        ("max_share", [None, "5"], ["'max_share'", "got '5' for rank 1"]),
        ("max_share", {"1": 5}, ["'max_share'", "or a list of one per rank", "got {'1': 5}"]),
    ],
)
def test_bad_per_rank_share_bounds_name_the_key_and_entry(key, value, fragments):
    fails(base(global_batch=64, **{key: value}), *fragments)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (
            base(global_batch=512, min_share=[256, 300]),
            "global batch 512 is smaller than the sum of min_share [256, 300] = 556",
        ),
        (
            base(global_batch=600, max_share=[200, 128]),
            "global batch 600 exceeds the sum of max_share [200, 128] = 328",
        ),
        (
            base(min_share=[5, 1], max_share=[4, None]),
            "max_share 4 is below min_share 5 for rank 0",
        ),
        (base(min_share=8, max_share=[None, 4]), "max_share 4 is below min_share 8 for rank 1"),
    ],
)
def test_global_batch_against_per_rank_share_bounds(raw, fragment):
    fails(raw, "global_batch", fragment)


def test_a_resolved_config_resolves_again():
    once = resolve(base(policy={"name": "static"}), 2)
    assert resolve(once, 3) == {**once, "ranks": 3}


def test_contention_needs_pinned_cores():
    changes = [{"rank": 1, "mode": "contention", "start": 0}]
    fails(base(pin_cores=False, scenario={"changes": changes}), "pin_cores")


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


@pytest.mark.parametrize("key", ["drop_last", "pin_cores"])
@pytest.mark.parametrize("value", ["yes", "true", 1, 0, None])
def test_bad_booleans(key, value):
    fails(base(**{key: value}), repr(key), "true or false")


@pytest.mark.parametrize("value", [0, 0.0, -0.5, 1.0001, 2, "0.9", float("nan"), [0.9]])
def test_target_accuracy_out_of_range(value):
    fails(base(target_accuracy=value), "'target_accuracy'")


@pytest.mark.parametrize("value", [1, 1.0, 0.5, 1e-9, None])
def test_target_accuracy_in_range(value):
    assert resolve(base(target_accuracy=value), 2)["target_accuracy"] == value


def test_target_accuracy_rejects_booleans():
    fails(base(target_accuracy=True), "'target_accuracy'")


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


@pytest.mark.parametrize(
    ("raw", "ranks", "fragment"),
    [
        (base(global_batch=1), 2, "smaller than ranks x min_share = 2 x 1"),
        (base(global_batch=3), 4, "smaller than ranks x min_share = 4 x 1"),
        (base(global_batch=8, min_share=3), 3, "smaller than ranks x min_share = 3 x 3"),
        (base(global_batch=64, max_share=16), 3, "exceeds ranks x max_share = 3 x 16"),
        (base(global_batch=64, min_share=5, max_share=4), 2, "max_share 4 is below min_share 5"),
    ],
)
def test_global_batch_against_ranks_and_share_bounds(raw, ranks, fragment):
    message = fails(raw, fragment, ranks=ranks)
    assert re.search(r"global.batch|min_share|max_share", message)


def test_global_batch_equal_to_ranks_times_min_share_is_fine():
    assert resolve(base(global_batch=6, min_share=3), 2)["global_batch"] == 6
    assert resolve(base(global_batch=4), 4)["ranks"] == 4


def test_too_small_global_batch_names_the_key():
    message = fails(base(global_batch=1), ranks=2)
    assert "global_batch" in message
    assert not message.startswith("policy")


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


@pytest.mark.parametrize("key", ["scenario", "optimizer"])
@pytest.mark.parametrize("value", ["none", None, [1, 2]])
def test_nested_blocks_must_be_mappings(key, value):
    fails(base(**{key: value}), repr(key), "mapping")


def test_valid_scenario_passes_through():
    scenario = {"slowdown": [1, 3], "changes": [{"rank": 1, "factor": 2, "start": 5, "end": None}]}
    config = resolve(base(scenario=scenario), 2)
    assert config["scenario"] == scenario


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


@pytest.mark.parametrize("value", [5, ["a"]])
def test_non_string_dataset(value):
    fails({"dataset": value}, "'dataset'")


@pytest.mark.parametrize(
    "scenario",
    [{"changes": [{"rank": 0, "start": "5", "end": 10}]}, {"slowdown": 3}],
)
def test_scenario_type_errors_become_dynalloc_errors(scenario):
    fails(base(scenario=scenario), "scenario")


@pytest.mark.parametrize(
    ("iterations", "epochs", "batches", "total", "planned"),
    [
        (None, 1, 10, 10, 1),
        (None, 3, 7, 21, 3),
        (5, 3, 10, 5, 1),
        (10, 1, 10, 10, 1),
        (11, 1, 10, 11, 2),
        (25, 1, 10, 25, 3),
        (30, 9, 10, 30, 3),
        (1, 1, 1, 1, 1),
    ],
)
def test_total_iterations_and_planned_epochs(iterations, epochs, batches, total, planned):
    config = resolve(base(iterations=iterations, epochs=epochs), 2)
    assert total_iterations(config, batches) == total
    assert planned_epochs(config, batches) == planned


def write(tmp_path, text, name="run.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_load_config_reads_a_mapping(tmp_path):
    path = write(tmp_path, "dataset: data\nglobal_batch: 64\npolicy:\n  name: static\n")
    assert load_config(path) == {
        "dataset": "data",
        "global_batch": 64,
        "policy": {"name": "static"},
    }
    assert load_config(str(path)) == load_config(path)


def test_load_config_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(DynallocError, match=re.escape(str(path))) as caught:
        load_config(path)
    assert "No such file" in str(caught.value)


def test_load_config_on_a_directory(tmp_path):
    with pytest.raises(DynallocError, match=re.escape(str(tmp_path))):
        load_config(tmp_path)


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: b: c\n", "key: 'unterminated\n", "\tx: 1\n"])
def test_load_config_invalid_yaml(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(DynallocError, match=re.escape(str(path))) as caught:
        load_config(path)
    assert "not valid YAML" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "- 1\n- 2\n", "42\n", "just text\n"])
def test_load_config_non_mapping(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(DynallocError, match=re.escape(str(path))) as caught:
        load_config(path)
    assert "mapping" in str(caught.value)


def test_load_config_not_utf8(tmp_path):
    path = write(tmp_path, b"dataset: \xff\xfe\n")
    with pytest.raises(DynallocError, match=re.escape(str(path))):
        load_config(path)


# ---- stream (how the ranks read a streamed dataset) and the reads in the scenario ------------


def test_stream_defaults_are_filled_and_given_values_normalised():
    assert resolve(base(), 2)["stream"] == DEFAULTS["stream"]
    stream = resolve(base(stream={"input_size": 24, "mean": 100, "on_bad_record": "skip"}), 2)
    assert stream["stream"]["input_size"] == [24, 24]
    assert stream["stream"]["mean"] == [100.0] and stream["stream"]["on_bad_record"] == "skip"
    assert stream["stream"]["crop_scale"] == DEFAULTS["stream"]["crop_scale"]


@pytest.mark.parametrize(
    ("stream", "fragment"),
    [
        ({"input_size": 0}, "stream.input_size"),
        ({"crop_scale": [0.5, 2]}, "stream.crop_scale"),
        ({"crop_ratio": [2, 1]}, "stream.crop_ratio"),
        ({"flip": "yes"}, "stream.flip"),
        ({"eval_crop": 0}, "stream.eval_crop"),
        ({"mean": "x"}, "stream.mean"),
        ({"std": [1, 0]}, "stream.std"),
        ({"decode_workers": -1}, "stream.decode_workers"),
        ({"on_bad_record": "ignore"}, "stream.on_bad_record"),
        ({"inputsize": 3}, "stream.inputsize"),
        ([1, 2], "'stream'"),
    ],
)
def test_bad_stream_values_name_the_key(stream, fragment):
    fails(base(stream=stream), fragment)


def test_a_resolved_config_with_a_stream_section_resolves_again():
    config = resolve(base(stream={"input_size": [8, 12], "std": 50}), 2)
    assert resolve(config, 2)["stream"] == config["stream"]


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
