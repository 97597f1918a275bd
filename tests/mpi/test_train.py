"""`dynalloc train` on real MPI ranks: the run directory, exactness, and bad input."""

import json

import numpy as np
import pytest
import yaml
from helpers import dynalloc, parameters, read_rows

pytestmark = pytest.mark.mpi

BATCH = 64


def write_config(tmp_path, name="run.yaml", **overrides):
    config = {
        "model": "mlp",
        "global_batch": BATCH,
        "iterations": 30,
        "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
        "policy": {"name": "adaptive"},
        "seed": 3,
    }
    config.update(overrides)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


def train(tmp_path, ranks, out="run", **overrides):
    config = write_config(tmp_path, f"{out}.yaml", **overrides)
    return dynalloc(
        "train", "--config", config, "--out", tmp_path / out, ranks=None if ranks == 1 else ranks
    )


def train_size(dataset):
    return json.loads((dataset / "manifest.json").read_text())["splits"]["train"]["n"]


@pytest.fixture(scope="module")
def reference(digits, tmp_path_factory):
    """One process with the whole global batch: what every allocation must reproduce."""
    tmp = tmp_path_factory.mktemp("reference")
    result = train(tmp, 1, dataset=str(digits))
    assert result.returncode == 0, result.stderr
    return tmp / "run"


@pytest.mark.parametrize(("ranks", "slowdown"), [(2, [1, 3]), (3, [1, 3, 2])])
def test_any_allocation_trains_the_same_model_as_one_process(
    digits, reference, tmp_path, ranks, slowdown
):
    result = train(tmp_path, ranks, dataset=str(digits), scenario={"slowdown": slowdown})
    assert result.returncode == 0, result.stderr
    run = tmp_path / "run"
    rows = read_rows(run / "iterations.csv")
    shares = {}
    for row in rows:
        shares.setdefault(int(row["iteration"]), []).append(int(row["batch_size"]))
    assert len(rows) == ranks * 30 and sorted(shares) == list(range(30))
    n = train_size(digits)
    last = n // BATCH  # the last batch of an epoch holds the remainder
    for iteration, split in shares.items():
        assert sum(split) == (BATCH if iteration % (last + 1) != last else n - last * BATCH)
    assert len({tuple(s) for s in shares.values()}) > 1, "the shares never moved"
    expected, got = parameters(reference), parameters(run)
    assert expected.keys() == got.keys()
    worst = max(np.abs(expected[k] - got[k]).max() for k in expected)
    assert worst <= 1e-4, worst


def test_run_directory_holds_every_file_of_the_contract(digits, tmp_path):
    result = train(
        tmp_path,
        2,
        dataset=str(digits),
        epochs=2,
        iterations=None,
        scenario={"slowdown": [1, 2]},
        target_accuracy=0.5,
    )
    assert result.returncode == 0, result.stderr
    run = tmp_path / "run"
    assert sorted(p.name for p in run.iterdir()) == [
        "checkpoints",
        "config.yaml",
        "epochs.csv",
        "iterations.csv",
        "metrics.json",
        "model.params",
        "train.log",
    ]
    rows = read_rows(run / "iterations.csv")
    assert list(rows[0]) == [
        "iteration",
        "epoch",
        "rank",
        "batch_size",
        "compute_s",
        "sync_s",
        "wait_s",
        "iteration_s",
        "loss",
        "slowdown",
        "policy",
    ]
    n = train_size(digits)
    batches = -(-n // BATCH)  # the last batch smaller
    assert len(rows) == 2 * 2 * batches
    for iteration in range(2 * batches):
        mine = [r for r in rows if int(r["iteration"]) == iteration]
        computes = [float(r["compute_s"]) for r in mine]
        for r in mine:
            assert float(r["wait_s"]) == pytest.approx(max(computes) - float(r["compute_s"]))
        assert [float(r["slowdown"]) for r in mine] == [1.0, 2.0]
    epochs = read_rows(run / "epochs.csv")
    assert [int(e["epoch"]) for e in epochs] == [0, 1]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["ranks"] == 2 and metrics["policy"] == "adaptive"
    assert metrics["samples"] == 2 * n
    assert metrics["final_test_accuracy"] == pytest.approx(float(epochs[-1]["test_accuracy"]))
    assert metrics["final_test_accuracy"] > 0.5
    assert metrics["time_to_target_s"] is not None
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["ranks"] == 2 and resolved["dataset"] == str(digits)
    assert "samples/s" in result.stderr and "shares" in result.stderr


@pytest.mark.parametrize("policy", ["proportional", "adaptive"])
def test_a_per_rank_cap_holds_the_faster_rank(digits, tmp_path, policy):
    """Rank 0 three times slower: the policy would give rank 1 about 48 of 64 samples, but its
    node allows 20 (`max_share: [null, 20]`); rank 1 gets its cap and never more, last batches
    included."""
    result = train(
        tmp_path,
        2,
        dataset=str(digits),
        policy={"name": policy},
        max_share=[None, 20],
        scenario={"slowdown": [3, 1]},
    )
    assert result.returncode == 0, result.stderr
    run = tmp_path / "run"
    rows = read_rows(run / "iterations.csv")
    faster = [int(r["batch_size"]) for r in rows if r["rank"] == "1"]
    assert len(faster) == 30
    assert max(faster) == 20, faster
    assert faster.count(20) >= 20, faster  # held at its cap, not merely below it
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert (resolved["min_share"], resolved["max_share"]) == (1, [None, 20])


def corrupt(digits, tmp_path, how):
    import shutil

    copy = tmp_path / "data"
    shutil.copytree(digits, copy)
    if how == "flip":
        path = copy / "train_x.npy"
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
    elif how == "nan":
        from dynalloc.data.staged import file_sha256

        x = np.load(copy / "train_x.npy")
        x[5, 0, 0, 0] = np.nan
        np.save(copy / "train_x.npy", x)
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["sha256"]["train_x.npy"] = file_sha256(copy / "train_x.npy")
        (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


BAD = {
    "unknown policy": ({"policy": {"name": "fastest"}}, "unknown policy 'fastest'"),
    "unknown model": ({"model": "vgg"}, "unknown model 'vgg'"),
    "batch below ranks": ({"global_batch": 1}, "global batch 1 is smaller than ranks"),
    "batch below ranks x min_share": ({"min_share": 40}, "ranks x min_share = 2 x 40"),
    "max_share per rank": ({"max_share": [None, 20, 30]}, "'max_share' has 3 entries for 2 ranks"),
    "scenario rank": (
        {"scenario": {"changes": [{"rank": 5, "factor": 2, "start": 0, "end": None}]}},
        "rank 5 names no rank",
    ),
    "unknown key": ({"bach_size": 3}, "unknown config key 'bach_size'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_config_is_one_line_exit_2_and_no_run_directory(digits, tmp_path, case):
    overrides, message = BAD[case]
    result = train(tmp_path, 2, dataset=str(digits), **overrides)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("missing", "not found"),
        ("flip", "corrupted"),
        ("nan", "NaN in the data"),
    ],
)
def test_bad_dataset_is_one_line_exit_2(digits, tmp_path, how, message):
    data = tmp_path / "nowhere" if how == "missing" else corrupt(digits, tmp_path, how)
    result = train(tmp_path, 2, dataset=str(data))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "run").exists()


def test_unwritable_run_directory_is_one_line_exit_2(digits, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    config = write_config(tmp_path, dataset=str(digits))
    result = dynalloc("train", "--config", config, "--out", tmp_path / "file" / "run", ranks=2)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot create run directory" in lines[0], result.stderr


def test_diverging_loss_stops_with_the_iteration_named(digits, tmp_path):
    result = train(
        tmp_path, 2, dataset=str(digits), optimizer={"name": "sgd", "lr": 1e6, "momentum": 0.9}
    )
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "the loss became" in last and "at iteration" in last, result.stderr
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_contention_slows_the_rank_for_its_span_and_leaves_no_process(digits, tmp_path):
    import subprocess

    changes = [{"rank": 1, "mode": "contention", "processes": 1, "start": 10, "end": 20}]
    result = train(
        tmp_path,
        2,
        dataset=str(digits),
        model="lenet",
        global_batch=256,
        iterations=30,
        policy={"name": "static"},
        scenario={"changes": changes},
    )
    assert result.returncode == 0, result.stderr
    rows = [r for r in read_rows(tmp_path / "run" / "iterations.csv") if r["rank"] == "1"]
    inside = [float(r["compute_s"]) for r in rows if 11 <= int(r["iteration"]) < 20]
    outside = [float(r["compute_s"]) for r in rows if int(r["iteration"]) >= 21]
    ratio = np.median(inside) / np.median(outside)
    print(f"contention slowed rank 1 by {ratio:.2f}x")
    assert ratio > 1.4, (inside, outside)
    logged = {int(r["iteration"]): float(r["slowdown"]) for r in rows}
    assert [logged[i] for i in (9, 10, 19, 20)] == [1.0, 2.0, 2.0, 1.0]
    burners = subprocess.run(["pgrep", "-f", "sched_setaffinity"], capture_output=True)
    assert burners.stdout == b"", "a CPU burner outlived the run"
