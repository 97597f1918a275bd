"""The pipeline trains `framework: torch` runs for real: the tiny grid in the PyTorch
environment (torch_python), its run directories summarised, compared and replayed like MXNet's;
a torch grid with MXNet's dist_sync is refused when the DAG is built."""

import pytest
import torch_check
from helpers import ROOT, SNAKEMAKE, read_rows, snakemake

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
    pytest.mark.skipif(
        not (ROOT / ".venv-torch" / "bin" / "python").exists(),
        reason="make setup-torch builds .venv-torch (make test does)",
    ),
]


def test_the_pipeline_trains_torch_runs(tmp_path):
    results = tmp_path / "results"
    run = snakemake(results=results, override={"training": {"framework": "torch"}})
    assert run.returncode == 0, run.stderr[-3000:]
    summary = read_rows(results / "summary.csv")
    assert sorted(r["policy"] for r in summary) == ["adaptive", "static"]
    train = results / "runs" / "digits-mlp-adaptive-slowdown-1-3-r2-s0" / "train"
    assert "framework: torch" in (train / "config.yaml").read_text()
    shares = {int(r["batch_size"]) for r in read_rows(train / "iterations.csv")}
    assert len(shares) > 1  # adaptive moved them
    assert torch_check.state_dict_keys(train / "model.params")  # PyTorch's own file
    assert (results / "replay.csv").exists() and (results / "plots" / "shares.png").exists()


def test_a_torch_grid_refuses_mxnets_dist_sync(tmp_path):
    override = {
        "training": {"framework": "torch"},
        "policies": {"dist_sync": {}},
        "grid": {"policy": ["static", "dist_sync"]},
    }
    run = snakemake("-n", results=tmp_path / "results", override=override)
    assert run.returncode != 0
    said = run.stdout + run.stderr
    assert "MXNet's own dist_sync, which a framework: torch run cannot use" in said
