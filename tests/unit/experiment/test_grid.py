"""The pipeline grid: run names, run configs, and every mistake named before a job starts."""

import pytest
from dynalloc.errors import DynallocError
from dynalloc.experiment.grid import expand_runs, stage_arguments


def pipeline(**overrides):
    config = {
        "results": "out",
        "datasets": {"digits": {"source": "digits"}},
        "scenarios": {"slow": {"slowdown": {1: 3}}, "flat": {"jitter": 0.2, "jitter_draw": 4}},
        "policies": {"static": {}, "wide": {"kind": "adaptive", "dead_band": 0.05}},
        "grid": {
            "dataset": ["digits"],
            "model": ["mlp"],
            "policy": ["static", "wide"],
            "scenario": ["slow", "flat"],
            "ranks": [2, 3],
            "seed": [0],
        },
        "training": {"global_batch": 64, "epochs": 1},
    }
    config.update(overrides)
    return config


def test_every_point_is_one_run_with_a_readable_name():
    runs = expand_runs(pipeline())
    assert len(runs) == 8
    run = runs["digits-mlp-wide-slow-r3-s0"]
    assert run["ranks"] == 3 and run["dataset"] == "digits" and run["command"] == "train"
    config = run["config"]
    assert config["policy"] == {"name": "adaptive", "dead_band": 0.05}
    assert config["scenario"] == {"slowdown": [1.0, 3.0, 1.0], "changes": []}
    assert runs["digits-mlp-wide-flat-r2-s0"]["config"]["scenario"] == {
        "slowdown": [1.0, 1.0],
        "changes": [],
        "jitter": 0.2,
        "jitter_draw": 4,
    }
    assert config["dataset"] == "out/data/digits" and config["global_batch"] == 64
    assert config["labels"] == {
        "run": "digits-mlp-wide-slow-r3-s0",
        "dataset": "digits",
        "scenario": "slow",
        "policy": "wide",
    }


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"grid": {**pipeline()["grid"], "seed": []}}, "grid.seed is empty"),
        ({"grid": {**pipeline()["grid"], "scenario": ["steep"]}}, "'steep'"),
        ({"scenarios": {"slow": {"slowdown": {4: 3}}, "flat": {}}}, "names rank 4"),
        (
            {"scenarios": {"slow": {"changes": [{"rank": 2, "start": 0}]}, "flat": {}}},
            "changes[0].rank 2",
        ),
        ({"policies": {"static": {}, "wide": {"kind": "fastest"}}}, "unknown policy 'fastest'"),
        # a policy's parameters are checked when the DAG is built, not after static trained
        (
            {"policies": {"static": {}, "wide": {"kind": "adaptive", "dead_bnd": 0.05}}},
            "policies.wide: policy: adaptive has no parameter 'dead_bnd'",
        ),
        (
            {"policies": {"static": {}, "wide": {"kind": "controller", "gain": 2}}},
            "policies.wide: policy: controller needs 0 < gain <= 1",
        ),
    ],
)
def test_mistakes_are_named(overrides, fragment):
    config = pipeline(**overrides)
    if "scenarios" in overrides and "changes" in str(overrides):
        config["grid"]["ranks"] = [2]
    with pytest.raises(DynallocError) as caught:
        expand_runs(config)
    assert fragment in str(caught.value)


def test_per_rank_share_bounds_need_runs_of_as_many_ranks():
    bounds = {"global_batch": 64, "min_share": [1, 8], "max_share": [None, 20]}
    with pytest.raises(DynallocError) as caught:
        expand_runs(pipeline(training=bounds))
    assert "training.min_share has 2 entries (one per rank)" in str(caught.value)
    assert "digits-mlp-static-slow-r3-s0 has 3 ranks" in str(caught.value)
    config = pipeline(training=bounds)
    config["grid"]["ranks"] = [2]
    for run in expand_runs(config).values():
        assert (run["config"]["min_share"], run["config"]["max_share"]) == ([1, 8], [None, 20])


def test_colliding_names_are_refused():
    config = pipeline(datasets={"a-b": {"source": "digits"}, "a": {"source": "digits"}})
    config["grid"].update(
        dataset=["a-b", "a"],
        model=["mlp", "b-mlp"],
        policy=["static"],
        scenario=["flat"],
        ranks=[2],
    )
    with pytest.raises(DynallocError, match="both named 'a-b-mlp-static-flat-r2-s0'"):
        expand_runs(config)


def test_a_list_of_grids_is_their_union():
    config = pipeline()
    first = {**config["grid"], "ranks": [2]}
    config["grid"] = [first, {**first, "policy": ["static"], "scenario": ["slow"], "ranks": [3]}]
    assert sorted(expand_runs(config)) == sorted(
        [f"digits-mlp-{p}-{s}-r2-s0" for p in ("static", "wide") for s in ("slow", "flat")]
        + ["digits-mlp-static-slow-r3-s0"]
    )
    config["grid"][1]["seed"] = []
    with pytest.raises(DynallocError, match=r"grid\[1\]\.seed is empty"):
        expand_runs(config)


def test_dist_sync_runs_the_baseline_command_with_equal_shares():
    config = pipeline(policies={"static": {}, "ps": {"kind": "dist_sync"}})
    config["grid"]["policy"] = ["static", "ps"]
    run = expand_runs(config)["digits-mlp-ps-flat-r2-s0"]
    assert run["command"] == "baseline" and run["config"]["policy"] == {"name": "static"}
    config["policies"]["ps"]["lr"] = 1
    with pytest.raises(DynallocError, match="dist_sync takes no parameters"):
        expand_runs(config)


def test_stage_arguments():
    spec = {"source": "synthetic", "samples": 100, "shape": [1, 8, 8], "test_fraction": 0.25}
    assert stage_arguments(spec) == [
        "--source",
        "synthetic",
        "--test-fraction",
        "0.25",
        "--samples",
        "100",
        "--shape",
        "1,8,8",
    ]


def test_runs_compared_with_each_other_are_scheduled_one_after_another():
    """The grid's product puts policy before scenario; the priorities regroup the runs by
    comparison (dataset, model, scenario, ranks, seed), keeping the grid's order inside each."""
    runs = expand_runs(pipeline())
    by_priority = sorted(runs, key=lambda name: -runs[name]["priority"])
    assert sorted(runs[name]["priority"] for name in runs) == list(range(1, 9))
    assert by_priority == [
        f"digits-mlp-{policy}-{scenario}-r{ranks}-s0"
        for scenario, ranks in (("slow", 2), ("slow", 3), ("flat", 2), ("flat", 3))
        for policy in ("static", "wide")
    ]


def test_a_models_entry_may_be_a_training_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    models = {"mine": {"script": str(script), "script_args": ["--shift", 2]}}
    config = pipeline(models=models)
    config["grid"]["model"] = ["mlp", "mine"]
    runs = expand_runs(config)
    mine = runs["digits-mine-static-slow-r2-s0"]["config"]
    assert mine["script"] == str(script) and mine["script_args"] == ["--shift", "2"]
    assert "model" not in mine and mine["labels"]["model"] == "mine"
    assert "script" not in runs["digits-mlp-static-slow-r2-s0"]["config"]
    config["models"]["mine"]["script"] = str(tmp_path / "missing.py")
    with pytest.raises(DynallocError, match=r"models\.mine\.script: .*missing\.py is not a file"):
        expand_runs(config)
    config["models"]["mine"] = {"script": str(script), "zoo": "resnet18_v1"}
    with pytest.raises(DynallocError, match="unknown key 'zoo' beside script"):
        expand_runs(config)


def test_dist_sync_cannot_run_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("")
    config = pipeline(
        models={"mine": {"script": str(script)}}, policies={"ps": {"kind": "dist_sync"}}
    )
    config["grid"].update(model=["mine"], policy=["ps"])
    with pytest.raises(DynallocError, match="'mine' is a training script, which 'ps'"):
        expand_runs(config)


def test_elastic_min_ranks_above_a_runs_ranks_is_refused_naming_the_key():
    training = {"global_batch": 64, "elastic": {"min_ranks": 3, "max_restarts": 1}}
    with pytest.raises(DynallocError) as caught:
        expand_runs(pipeline(training=training))
    assert "config key 'training.elastic.min_ranks' is 3, but the run has 2 ranks" in str(
        caught.value
    )
    runs = expand_runs(pipeline(training={**training, "elastic": {"min_ranks": 2}}))
    assert runs["digits-mlp-wide-slow-r3-s0"]["config"]["elastic"] == {"min_ranks": 2}
