"""Run directories drawn from a known model of the ranks, for the tests of what the simulator
fits from runs (`dynalloc simulate --fit`, `benchmarks/bench_simulate.py`): whatever the fit
should recover is set here."""

import json

import numpy as np
import pandas as pd
import yaml
from dynalloc import rundir

A, C = np.array([0.02, 0.03]), np.array([0.001, 0.0012])  # each rank's own a + c b
EXCHANGE, OVERHEAD = 0.004, 0.006


def synthetic_run(
    root, shares, slowdown, noise=0.05, changes=(), epoch_batches=None, seed=0, policy="adaptive"
):
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
            policy=policy,
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
        "policy": {"name": policy},
        "scenario": {"slowdown": list(slowdown), "changes": list(changes)},
    }
    (root / rundir.CONFIG).write_text(yaml.safe_dump(config))
    metrics = dict.fromkeys(rundir.METRICS_KEYS, 0) | {
        "policy": policy, "ranks": ranks, "global_batch": config["global_batch"],
    }  # fmt: skip
    (root / rundir.METRICS).write_text(json.dumps(metrics))
    return root


def factor(changes, rank, iteration):
    """The product of the scenario changes active on `rank` at `iteration`."""
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
