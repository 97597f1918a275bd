"""The benchmark harness in small: config/bench.yaml cut to one scenario and a few iterations,
run by snakemake on the real Fashion-MNIST, repeated with another seed for two of its policies
(make bench-repeats), then BENCHMARKS.md generated from both results."""

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
    # make bench-repeats in small: seed 1 of two of the policies, in its own results directory
    repeats = tmp_path / "repeats" / "results"
    repeats.parent.mkdir()
    grid = {**SMOKE["grid"][0], "policy": ["adaptive", "static"], "seed": [1]}
    run = snakemake(
        results=repeats,
        configfile=ROOT / "config" / "bench.yaml",
        override={**SMOKE, "grid": [grid]},
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    discussion = tmp_path / "discussion.md"
    discussion.write_text("Adaptive ran at {sps[homogeneous][adaptive]:.0f} samples/s.\n")
    on_repeats = tmp_path / "discussion-repeats.md"
    on_repeats.write_text("Median ratio to static: {paired[homogeneous][static]:.3f}.\n")
    out = tmp_path / "BENCHMARKS.md"
    report = subprocess.run(
        [
            str(SNAKEMAKE.with_name("python")),
            "benchmarks/report.py",
            "--results", results,
            "--repeats", repeats,
            "--config", "config/bench.yaml",
            "--discussion", discussion, on_repeats,
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
    assert "Median ratio to static: " in text and "{paired" not in text
    # targets against a repeated rival are judged on both seeds; the fastest-policy row names
    # the closest rival of that run, static (repeated) or dist_sync (seed 0 only), as the
    # machine's noise has it in a 6-iteration run
    assert "| `adaptive` at most 2% slower than `static`, homogeneous | median " in text, text
    assert "over 2 seeds" in text, text
    fastest = next(line for line in text.splitlines() if "fastest non-oracle" in line)
    if "`static`" in fastest.split("|")[2]:
        assert "| median " in fastest and "over 2 seeds" in fastest, fastest
    else:
        assert "`dist_sync`" in fastest and "median" not in fastest, fastest
    assert "| homogeneous | `static` | " in text and "| homogeneous | `dist_sync` | " not in text
    # every policy replayed on the speeds of the four LeNet runs of ours (dist_sync is MXNet's)
    assert "## Paired replay" in text and "| homogeneous | 4 | " in text, text
    assert (tmp_path / "figures" / "throughput.png").stat().st_size > 0
