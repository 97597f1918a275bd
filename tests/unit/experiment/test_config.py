"""`dynalloc.experiment.run_config.resolve`: the run config's own keys (dataset, global batch
and share bounds, seed, stall timeout, booleans, target accuracy) and their defaults, one
DynallocError naming the key for every bad value, and the iteration and epoch counts."""

import copy
import re
from pathlib import Path

import pytest
import yaml
from dynalloc.experiment.run_config import (
    DEFAULTS,
    planned_epochs,
    resolve,
    total_iterations,
)
from run_configs import DATASET, base, fails


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


@pytest.mark.parametrize("key", ["scenario", "optimizer"])
@pytest.mark.parametrize("value", ["none", None, [1, 2]])
def test_nested_blocks_must_be_mappings(key, value):
    fails(base(**{key: value}), repr(key), "mapping")


@pytest.mark.parametrize("value", [5, ["a"]])
def test_non_string_dataset(value):
    fails({"dataset": value}, "'dataset'")


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
