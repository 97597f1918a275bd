"""A network with BatchNorm never gets a share of a sample or two on a real run: BatchNorm in
training mode would normalise it to zeros."""

import pytest
import yaml
from helpers import dynalloc, read_rows

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize(("model", "floor"), [("resnet", 8), ("mlp", 1)])
def test_batchnorm_networks_keep_eight_samples_per_rank(digits, tmp_path, model, floor):
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": str(digits),
                "model": model,
                "global_batch": 64,
                "iterations": 12,
                "policy": {"name": "proportional"},
                "scenario": {"slowdown": [1, 60]},  # proportional gives rank 1 about 1 sample
            }
        )
    )
    result = dynalloc("train", "--config", config, "--out", tmp_path / "run", ranks=2)
    assert result.returncode == 0, result.stderr[-2000:]
    shares = [int(r["batch_size"]) for r in read_rows(tmp_path / "run" / "iterations.csv")]
    assert min(shares) == floor, shares
    assert ("the network has BatchNorm: min_share 8" in result.stderr) == (floor == 8)
