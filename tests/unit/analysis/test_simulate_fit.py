"""`dynalloc simulate --fit` (`analysis.fit`): a cluster file fitted from a run directory, checked
on runs generated from a known model (what the fit must recover) and on real recorded runs."""

import numpy as np
import pandas as pd
import pytest
import yaml
from dynalloc.analysis import fit
from dynalloc.cli import main
from dynalloc.core.cluster_file import parse_cluster
from fitted_runs import EXCHANGE, OVERHEAD, A, C, moving_shares, synthetic_run


def test_the_costs_exchange_overhead_and_noise_of_a_moving_run_are_recovered(tmp_path):
    spec = fit.fit(synthetic_run(tmp_path / "run", moving_shares(), [1.0, 1.0]))
    costs = [g["cost"] for g in spec["groups"]]
    assert [c["intercept_s"] for c in costs] == pytest.approx(A, rel=0.25)
    assert [c["per_sample_s"] for c in costs] == pytest.approx(C, rel=0.05)
    assert spec["network"]["exchange_s"] == pytest.approx(EXCHANGE)
    assert spec["overhead_s"] == pytest.approx(OVERHEAD)
    assert spec["groups"][0]["noise"] == pytest.approx(0.05, rel=0.2)
    assert spec["new_shape"] == pytest.approx(0.07, abs=0.03)


def test_the_emulated_slowdowns_are_divided_out_and_carried_over(tmp_path):
    change = {"rank": 0, "factor": 2.0, "start": 50, "end": 90, "mode": "sleep", "processes": 1}
    run = synthetic_run(tmp_path / "run", moving_shares(), [1.0, 3.0], changes=[change])
    spec = fit.fit(run)
    assert [g["slowdown"] for g in spec["groups"]] == [1.0, 3.0]
    assert spec["changes"] == [{"group": "rank0", "start": 50, "end": 90, "factor": 2.0}]
    assert spec["groups"][1]["cost"]["per_sample_s"] == pytest.approx(C[1], rel=0.05)
    cluster = parse_cluster(spec)
    assert cluster.factors(60).tolist() == [2.0, 3.0]


def test_a_run_that_never_moved_pools_the_intercept_from_its_last_batches(tmp_path):
    """Equal shares of 256 but for each epoch's last batch of 64 (4 epochs of 10 batches)."""
    shares = np.array([[128, 128]] * 40)
    shares[9::10] = [32, 32]
    spec = fit.fit(
        synthetic_run(tmp_path / "run", shares, [1.0, 1.0], noise=0.02, epoch_batches=10)
    )
    assert spec["dataset_size"] == 9 * 256 + 64
    costs = [(g["cost"]["intercept_s"], g["cost"]["per_sample_s"]) for g in spec["groups"]]
    fractions = [a / (a + 128 * c) for a, c in costs]
    truth = A / (A + 128 * C)
    assert np.mean(fractions) == pytest.approx(np.mean(truth), abs=0.04)


def test_the_fitted_cluster_predicts_a_run_under_another_policy(tmp_path):
    """Fitted from a run whose shares moved, the static run on the same machine."""
    spec = fit.fit(synthetic_run(tmp_path / "run", moving_shares(), [1.0, 2.0]))
    static = synthetic_run(tmp_path / "static", [[128, 128]] * 400, [1.0, 2.0], seed=5)
    predicted = fit.predicted_mean_s(spec, {"name": "static"})
    assert predicted == pytest.approx(fit.measured_mean_s(static), rel=0.03)


def test_cli_fits_saves_and_simulates(tmp_path, capsys):
    run = synthetic_run(tmp_path / "run", moving_shares(), [1.0, 3.0])
    saved, out = tmp_path / "fitted.yaml", tmp_path / "plan.csv"
    argv = ["simulate", "--fit", str(run), "--save-fit", str(saved), "--out", str(out),
            "--policies", "static", "adaptive"]  # fmt: skip
    assert main(argv) == 0
    assert saved.read_text().startswith(f"# Fitted by `dynalloc simulate --fit {run}`")
    assert parse_cluster(yaml.safe_load(saved.read_text())).ranks == 2
    table = pd.read_csv(out)
    assert table["policy"].tolist() == ["static", "adaptive", "optimum"]
    assert set(table["cluster"]) == {"run"}
    assert table.set_index("policy").loc["adaptive", "speedup"] > 1.5
    assert "adaptive" in capsys.readouterr().out
