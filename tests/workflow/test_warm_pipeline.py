"""A warm start in the pipeline: `warm_start: {policy: P}` starts a run from the costs of the same
grid point's run with policy P, which the train rule trains first; a name the grid does not
train is refused when the DAG is built."""

import pytest
import yaml
from helpers import SNAKEMAKE, read_rows, snakemake

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]

WARM = {"adaptive-warm": {"kind": "adaptive", "warm_start": {"policy": "adaptive"}}}
GRID = {"policy": ["static", "adaptive", "adaptive-warm"]}
# Rank 1 8x slower, not tiny.yaml's 3x: other test groups' jobs load rank 0's core, and at 3x
# the source run once learnt rank 0 as the slower rank (62:2).
SLOW = {"scenarios": {"slowdown-1-8": {"slowdown": {1: 8}}},
        "grid": {**GRID, "scenario": ["slowdown-1-8"]}}  # fmt: skip


def first_shares(train):
    rows = read_rows(train / "iterations.csv")
    return [int(r["batch_size"]) for r in rows if r["iteration"] == "0"]


def test_a_run_starts_from_the_costs_of_another_policys_run_of_its_point(tmp_path):
    results = tmp_path / "results"
    run = snakemake(results=results, override={"policies": WARM, **SLOW})
    assert run.returncode == 0, run.stderr[-3000:]
    runs = results / "runs"
    source = runs / "digits-mlp-adaptive-slowdown-1-8-r2-s0" / "train"
    warm = runs / "digits-mlp-adaptive-warm-slowdown-1-8-r2-s0" / "train"
    recorded = yaml.safe_load((warm / "config.yaml").read_text())["policy"]["warm_start"]
    assert recorded["source"] == str(source)
    fast, slow = first_shares(warm)  # rank 1 is 8x slower: balanced from the first iteration
    assert fast > 1.5 * slow and first_shares(source) == [32, 32]
    assert {r["policy"] for r in read_rows(results / "summary.csv")} >= {"adaptive-warm"}


def test_a_warm_start_from_a_policy_the_grid_does_not_train_is_refused(tmp_path):
    policies = {"adaptive-warm": {"kind": "adaptive", "warm_start": {"policy": "controller"}}}
    run = snakemake("-n", results=tmp_path / "results", override={"policies": policies,
                                                                  "grid": GRID})  # fmt: skip
    assert run.returncode != 0
    said = run.stdout + run.stderr
    assert "policies.adaptive-warm.warm_start: the grid does not train" in said
    assert "digits-mlp-controller-slowdown-1-3-r2-s0" in said
