"""The benchmark harness in small: config/bench.yaml cut to one scenario and a few iterations,
run by snakemake on the real Fashion-MNIST, then BENCHMARKS.md generated from its results."""

import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, SNAKEMAKE, snakemake

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]

FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
SMOKE = {
    "grid": [
        {
            "dataset": ["fashion-mnist"],
            "model": ["lenet"],
            "policy": ["static", "adaptive", "dist_sync"],
            "scenario": ["homogeneous"],
            "ranks": [2],
            "seed": [0],
        }
    ],
    "training": {"iterations": 6, "optimizer": {"schedule": {"warmup": 1}}},
}


def test_bench_smoke_runs_every_kind_of_run_and_writes_the_report(tmp_path):
    assert FASHION_MNIST.exists(), "make bench-data installs Debian's dataset-fashion-mnist"
    results = tmp_path / "results"
    run = snakemake(
        results=results, configfile=ROOT / "config" / "bench.yaml", override=SMOKE, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    discussion = tmp_path / "discussion.md"
    discussion.write_text("Adaptive ran at {sps[homogeneous][adaptive]:.0f} samples/s.\n")
    out = tmp_path / "BENCHMARKS.md"
    report = subprocess.run(
        [
            str(SNAKEMAKE.with_name("python")),
            "benchmarks/report.py",
            "--results", results,
            "--config", "config/bench.yaml",
            "--discussion", discussion,
            "--out", out,
            "--figures", tmp_path / "figures",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    text = out.read_text()
    for policy in ("static", "adaptive", "dist_sync"):
        assert f"| `{policy}` | 2 |" in text, text
    assert "`static` (MPI) at least as fast per sample as MXNet `dist_sync`" in text
    assert "Adaptive ran at " in text and "{sps" not in text
    assert (tmp_path / "figures" / "throughput.png").stat().st_size > 0
