"""`dynalloc simulate --fit` (`analysis.fit`): a cluster file fitted from a run directory, checked
on runs generated from a known model (what the fit must recover) and on real recorded runs."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from dynalloc import rundir
from dynalloc.analysis import fit
from dynalloc.cli import main
from dynalloc.core.cluster import parse_cluster
from dynalloc.core.policies import make_policy
from dynalloc.core.simulate import project

A, C = np.array([0.02, 0.03]), np.array([0.001, 0.0012])  # each rank's own a + c b
EXCHANGE, OVERHEAD = 0.004, 0.006


def synthetic_run(root, shares, slowdown, noise=0.05, changes=(), epoch_batches=None, seed=0):
    """A run directory as `dynalloc train` writes it, its times drawn from the model above:
    rank r computes slowdown x (A[r] + C[r] b) x lognormal noise (x 1.07 on a share new to it),
    the last to arrive exchanges for EXCHANGE, every iteration adds OVERHEAD."""
    rng = np.random.default_rng(seed)
    shares = np.asarray(shares)
    iterations, ranks = shares.shape
    slowdowns = np.array([[slowdown[r] * factor(changes, r, i) for r in range(ranks)]
                          for i in range(iterations)])  # fmt: skip
    sigma = np.sqrt(np.log1p(noise**2))
    own = (A + C * shares) * np.exp(sigma * rng.standard_normal(shares.shape) - sigma**2 / 2)
    seen = [set() for _ in range(ranks)]
    for i in range(iterations):
        for r in range(ranks):
            if shares[i, r] not in seen[r]:
                seen[r].add(shares[i, r])
                own[i, r] *= 1.07 if i else 3.0  # MXNet's warm-up at the first iteration
    busy = own * slowdowns
    slowest = busy.max(axis=1, keepdims=True)
    wait = slowest - busy
    rows = [
        rundir.Row(
            iteration=i,
            epoch=i // (epoch_batches or iterations),
            rank=r,
            batch_size=int(shares[i, r]),
            compute_s=busy[i, r],
            sync_s=EXCHANGE + wait[i, r],
            wait_s=wait[i, r],
            iteration_s=slowest[i, 0] + EXCHANGE + OVERHEAD,
            loss=1.0,
            slowdown=slowdowns[i, r],
            policy="adaptive",
        )._asdict()
        for i in range(iterations)
        for r in range(ranks)
    ]
    root.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(root / rundir.ITERATIONS, index=False)
    pd.DataFrame([[0, 1.0, 1.0, 1.0, 0.5]], columns=rundir.EPOCH_FIELDS).to_csv(
        root / rundir.EPOCHS, index=False
    )
    config = {
        "global_batch": int(shares[0].sum()),
        "ranks": ranks,
        "seed": 3,
        "iterations": None if epoch_batches else iterations,
        "policy": {"name": "adaptive"},
        "scenario": {"slowdown": list(slowdown), "changes": list(changes)},
    }
    (root / rundir.CONFIG).write_text(yaml.safe_dump(config))
    metrics = dict.fromkeys(rundir.METRICS_KEYS, 0) | {"global_batch": config["global_batch"]}
    (root / rundir.METRICS).write_text(json.dumps(metrics))
    return root


def factor(changes, rank, iteration):
    f = 1.0
    for c in changes:
        if (
            c["rank"] == rank
            and c["start"] <= iteration
            and (c["end"] is None or iteration < c["end"])
        ):
            f *= c["factor"]
    return f


def moving_shares(iterations=400, batch=256, seed=1):
    """Shares that move as a policy moves them: rank 0 anywhere from 80 to 176 of 256."""
    first = np.random.default_rng(seed).integers(80, 177, iterations)
    return np.stack([first, batch - first], axis=1)


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


def test_the_fitted_cluster_predicts_the_runs_own_mean_iteration_time(tmp_path):
    run = synthetic_run(tmp_path / "run", moving_shares(), [1.0, 2.0])
    cluster = parse_cluster(fit.fit(run))
    replayed = make_policy("static", 2, 256)
    predicted = project(cluster, replayed).times[1:].mean()
    static = synthetic_run(tmp_path / "static", [[128, 128]] * 400, [1.0, 2.0])
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
