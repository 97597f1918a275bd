"""`benchmarks/bench_simulate.py` and BENCHMARKS.md's planner section (`analysis.simtables`,
`benchmarks/report.py --simulate`): a bench in small, its runs drawn from a known model, fitted,
predicted and projected; the verdicts judged on the issue's tolerances."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from dynalloc.analysis import simtables
from fitted_runs import synthetic_run
from helpers import ROOT

BENCHMARKS = ROOT / "benchmarks"
PROJECTION = ROOT / "config" / "clusters" / "projection.yaml"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """A `make bench` results directory in small, static and adaptive with rank 1 twice as
    slow, and bench_simulate.py's tables for it."""
    root = tmp_path_factory.mktemp("bench")
    results = root / "results"
    names = {p: f"fashion-mnist-lenet-{p}-hetero-r2-s0" for p in ("static", "adaptive")}
    # adaptive's run near its balance (rank 0 192 of 256: 0.212 s against 2 x 0.107 s)
    near = 192 + np.random.default_rng(0).integers(-8, 9, 200)
    shares = {"static": np.full((200, 2), 128), "adaptive": np.stack([near, 256 - near], 1)}
    for policy, name in names.items():
        synthetic_run(results / "runs" / name / "train", shares[policy], [1.0, 2.0], policy=policy)
    rows = [
        f"{names[p]},fashion-mnist,hetero,lenet,{p},2,0,256,200,40,{sps},0.1,0.2,0.86,40,"
        for p, sps in (("static", 1000), ("adaptive", 1400))
    ]
    (results / "summary.csv").write_text(
        "run,dataset,scenario,model,policy,ranks,seed,global_batch,iterations,wall_s,"
        "samples_per_s,mean_wait_fraction,max_wait_fraction,final_test_accuracy,"
        "time_to_target_s,iterations_until_balanced\n" + "\n".join(rows) + "\n"
    )
    (results / "speedup.csv").write_text("run,speedup\n")
    projection = yaml.safe_load(PROJECTION.read_text()) | {"iterations": 40}
    (root / "projection.yaml").write_text(yaml.safe_dump(projection))
    out = root / "simulate"
    speed = ["--speed-ranks", "256", "--speed-iterations", "20"]
    done = subprocess.run(
        [sys.executable, BENCHMARKS / "bench_simulate.py", "--results", results, "--clusters",
         root / "projection.yaml", "--out", out, *speed],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return results, out


def test_every_run_is_fitted_and_predicted(bench):
    _, out = bench
    validation = pd.read_csv(out / "validation.csv")
    assert validation["policy"].tolist() == ["static", "adaptive"]
    assert validation["error"].abs().max() < 0.05  # drawn from the model the fit assumes
    speedups = pd.read_csv(out / "speedups.csv").iloc[0]
    measured = validation["measured_s"]
    assert speedups["measured"] == pytest.approx(measured.iloc[0] / measured.iloc[1])
    assert abs(speedups["from_static_error"]) < 0.05 and abs(speedups["from_adaptive_error"]) < 0.05
    projections = pd.read_csv(out / "projections.csv")
    assert sorted(projections["ranks"].unique()) == [64, 512, 4096]
    speed = pd.read_csv(out / "speed.csv")
    assert (
        set(speed["policy"]) >= {"static", "adaptive", "optimum"} and (speed["ranks"] == 256).all()
    )


def test_the_report_sets_the_section_and_its_verdicts(bench, tmp_path):
    results, out = bench
    (tmp_path / "d.md").write_text("text\n")
    done = subprocess.run(
        [sys.executable, BENCHMARKS / "report.py", "--results", results, "--simulate", out,
         "--discussion", tmp_path / "d.md", "--out", tmp_path / "B.md",
         "--figures", tmp_path / "figures"],
        cwd=BENCHMARKS.parent, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "B.md").read_text()
    assert "make bench-simulate" in text and "## Planner:" in text
    assert "| the fit of a run predicts its mean iteration time within 10% | worst " in text
    fit = next(line for line in text.splitlines() if "predicts its mean iteration time" in line)
    assert fit.endswith("| met |") and "within noise" not in text  # errors under 5% (above)
    assert "| lenet | hetero | 2 | `adaptive` | " in text
    assert "| 4,096 | " in text and "{speed" not in text


def facts(error=0.02, gap=0.01, seconds=1.0, behind=False):
    steady = {"static": 2.0, "adaptive": 1.0 + gap, "optimum": 1.0, "controller": 1.02}
    if behind:
        steady["controller"] = 1.0
    return simtables.facts(
        {
            "validation": pd.DataFrame({"error": [0.01, error]}),
            "speedups": pd.DataFrame({"from_static_error": [0.0], "from_adaptive_error": [error]}),
            "projections": pd.DataFrame(
                [{"ranks": 64, "policy": p, "steady_s": s} for p, s in steady.items()]
            ),
            "speed": pd.DataFrame(
                [
                    {"policy": p, "ranks": 4096, "iterations": 1000, "seconds": seconds}
                    for p in ("static", "adaptive")
                ]  # fmt: skip
            ),
        }
    )


@pytest.mark.parametrize(
    "case, key",
    [
        ({"error": -0.12}, "mean_met"),
        ({"error": 0.11}, "speedup_met"),
        ({"gap": 0.031}, "optimum_met"),
        ({"behind": True}, "ahead_met"),
        ({"seconds": 31.0}, "speed_met"),
    ],
)
def test_each_target_can_be_missed(case, key):
    assert facts()[key] == "met"
    assert facts(**case)[key] == "**missed**"


def test_a_speedup_missed_by_less_than_the_run_to_run_noise_is_missed():
    """12% off where 10% is allowed: missed, though two runs drift by more than 2% (the old
    rule's *within noise* with a 3% band)."""
    tables = {
        "validation": pd.DataFrame({"error": [0.01]}),
        "speedups": pd.DataFrame({"from_static_error": [0.12], "from_adaptive_error": [0.0]}),
        "projections": pd.DataFrame(
            [{"ranks": 64, "policy": p, "steady_s": 1.0} for p in ("static", "adaptive", "optimum")]
        ),
        "speed": pd.DataFrame(
            [
                {"policy": p, "ranks": 8, "iterations": 9, "seconds": 1}
                for p in ("static", "adaptive")
            ]
        ),
    }
    values = simtables.facts(tables)
    assert values["speedup_met"] == "**missed**" and values["mean_met"] == "met"
    assert "within noise" not in simtables.targets(values)
