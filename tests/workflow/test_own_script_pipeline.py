"""examples/own_script/pipeline.yaml for real: the user's own training script (a model-zoo
ResNet-18 with its own augmentation) trains under mpiexec -n 2 beside a built-in LeNet run, and
the summaries, the replay and the report take both."""

import pytest
import yaml
from helpers import ROOT, SNAKEMAKE, read_rows, snakemake

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]
PIPELINE = ROOT / "examples" / "own_script" / "pipeline.yaml"
SMALL = {  # the example's grid on the 8x8 digits, a few iterations
    "datasets": {"digits": {"source": "digits"}},
    "grid": {"dataset": ["digits"]},
    "training": {"global_batch": 64, "iterations": 8, "checkpoint": {"every": 4}},
}


def test_the_script_runs_beside_a_builtin_run_through_the_pipeline(tmp_path):
    results = tmp_path / "results"
    run = snakemake(results=results, configfile=PIPELINE, override=SMALL)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = read_rows(results / "summary.csv")
    assert sorted((r["model"], r["policy"]) for r in summary) == [
        ("lenet", "adaptive"),
        ("lenet", "static"),
        ("resnet18-script", "adaptive"),
        ("resnet18-script", "static"),
    ]
    script_run = results / "runs" / "digits-resnet18-script-adaptive-slowdown-1-2-r2-s0"
    config = yaml.safe_load((script_run / "train" / "config.yaml").read_text())
    assert config["script"] == str(ROOT / "examples" / "own_script" / "train_resnet.py")
    assert config["script_args"] == ["--shift", "2", "--contrast", "0.2"]
    rows = read_rows(script_run / "train" / "iterations.csv")
    assert sorted({int(r["rank"]) for r in rows}) == [0, 1] and len(rows) == 16
    replayed = {r["run"] for r in read_rows(results / "replay.csv")}
    assert script_run.name in replayed
    again = snakemake("-n", results=results, configfile=PIPELINE, override=SMALL)
    assert "Nothing to be done" in again.stdout + again.stderr
