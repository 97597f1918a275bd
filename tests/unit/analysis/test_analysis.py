"""Summaries, comparison tables and figures, checked on small run directories with known numbers."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dynalloc.cli import main
from dynalloc.errors import DynallocError
from helpers import make_run
from hypothesis import given
from hypothesis import strategies as st

pd = pytest.importorskip("pandas")
imread = pytest.importorskip("matplotlib.image").imread

from dynalloc.analysis.compare import compare  # noqa: E402
from dynalloc.analysis.replay import measured_speeds, redraw_jitter  # noqa: E402
from dynalloc.analysis.runs import load_run  # noqa: E402
from dynalloc.analysis.summary import iterations_until_balanced, summarize_run  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def with_imbalance(values):
    """Two ranks whose imbalance (max - min) / max is `values[i]` at iteration i."""
    return [[1.0 - v, 1.0] for v in values]


def test_summary_fields(tmp_path):
    # Rank 0 computes 1 s, rank 1 computes 3 s (then 2 s): rank 0 waits 2 s, then 1 s.
    compute = [[1, 3], [1, 3], [1, 2], [1, 2]]
    labels = {"dataset": "mnist5k", "scenario": "slowdown-1-3", "run": "slow-static-7"}
    run_dir = make_run(tmp_path, "dir", compute, labels=labels, samples_per_s=123.5)
    assert summarize_run(run_dir) == {
        "run": "slow-static-7",
        "dataset": "mnist5k",
        "scenario": "slowdown-1-3",
        "model": "lenet",
        "policy": "static",
        "ranks": 2,
        "seed": 7,
        "global_batch": 8,
        "iterations": 4,
        "wall_s": 2.0,
        "samples_per_s": 123.5,
        "mean_wait_fraction": pytest.approx(6 / 10 / 2),  # rank 0: 6 s of 4 + 6; rank 1: 0
        "max_wait_fraction": pytest.approx(0.6),
        "final_test_accuracy": 0.75,
        "time_to_target_s": None,
        "iterations_until_balanced": None,  # rank 0 waits half its time: never balanced
    }


def test_measured_speeds_leave_out_the_warm_up_and_a_short_last_batch(tmp_path):
    compute = [[9.0, 9.0], [1.0, 2.0], [2.0, 2.0], [0.5, 0.5]]
    shares = [[4, 4], [4, 4], [5, 3], [2, 1]]  # the last iteration: an epoch's 3-sample rest
    run = make_run(tmp_path, "run", compute, shares=shares)
    speeds = measured_speeds(load_run(run).iterations)
    assert np.allclose(speeds, [[1 / 4, 2 / 4], [2 / 5, 2 / 3]])


def test_another_jitter_draw_replaces_the_runs_own_and_keeps_the_machine():
    """Speeds measured under the usual draw, redrawn: the machine's part (here a rank twice as
    slow and a drift over the iterations) stays, the jitter is the other draw's."""
    from dynalloc.core.scenario import Scenario

    scenario = {"slowdown": [1.0, 1.0], "changes": [], "jitter": 0.3}
    iterations = np.arange(3, 40)
    machine = np.outer(1 + 0.01 * iterations, [1e-3, 2e-3])

    def emulated(draw):
        s = Scenario(2, **scenario, jitter_draw=draw)
        return np.array([[s.factor(r, int(i)) for r in range(2)] for i in iterations])

    redrawn = redraw_jitter(machine * emulated(0), iterations, scenario, 5)
    assert np.allclose(redrawn, machine * emulated(5))
    assert not np.allclose(redrawn, machine * emulated(0))


def test_summary_without_labels_names_the_directory(tmp_path):
    summary = summarize_run(make_run(tmp_path, "plain-run", [[1, 1]] * 3))
    assert (summary["run"], summary["dataset"], summary["scenario"]) == ("plain-run", "", "")
    assert summary["mean_wait_fraction"] == summary["max_wait_fraction"] == 0.0
    assert summary["iterations_until_balanced"] == 0


SETTLING = [[4, 4], [5, 3]] + [[6, 2]] * 6  # settles on [6, 2] at iteration 2


@pytest.mark.parametrize(
    ("shares", "changes", "expected"),
    [
        (SETTLING, (), 2),
        ([[60, 20], [41, 39]] + [[40, 40]] * 4, (), 1),  # 1/80 off on each rank: within 5%
        ([[4, 4]] * 4 + [[4, 4], [3, 5]] + [[2, 6]] * 6, [{"start": 4, "end": None}], 2),
        ([[4, 4]] * 3 + [[6, 2]] * 3 + [[4, 4]] * 6, [{"start": 3, "end": 6}], 0),  # at once
        ([[4, 4], [6, 2]] * 5, (), None),  # never 3 iterations in a row near its split
        (SETTLING, [{"start": 50, "end": 60}], 2),  # after the run: ignored
    ],
)
def test_iterations_until_balanced(tmp_path, shares, changes, expected):
    changes = [{"rank": 0, "factor": 2, **change} for change in changes]
    compute = [[1.0, 1.0]] * len(shares)
    run_dir = make_run(tmp_path, "run", compute, shares=shares, changes=changes)
    assert summarize_run(run_dir)["iterations_until_balanced"] == expected


def test_a_split_that_leaves_ranks_waiting_is_not_balanced(tmp_path):
    # Constant split, rank 1 takes 1.25 s to rank 0's 1 s: 10% of the busy time is waiting.
    run_dir = make_run(tmp_path, "run", [[1.0, 1.25]] * 6)
    assert summarize_run(run_dir)["iterations_until_balanced"] is None
    run_dir = make_run(tmp_path, "run2", [[1.0, 1.2]] * 6)  # 8.3%: balanced from the start
    assert summarize_run(run_dir)["iterations_until_balanced"] == 0


def test_balance_is_judged_per_phase(tmp_path):
    # Balanced before the change; rank 0 three times slower from 4 on and the split never moves.
    compute = [[1.0, 1.0]] * 4 + [[3.0, 1.0]] * 6
    run_dir = make_run(tmp_path, "run", compute, changes=[{"rank": 0, "factor": 3, "start": 4}])
    assert summarize_run(run_dir)["iterations_until_balanced"] is None


def reference_until_balanced(shares, events):
    """The definition with plain loops: per phase, the median split of its second half, the
    first iteration that starts 3 in a row within 5% of it (L1 over the ranks' fractions)."""
    fractions = [[b / sum(row) for b in row] for row in shares]
    starts = sorted({e for e in events if e < len(shares)})
    worst = 0
    for first, end in zip(starts, [*starts[1:], len(shares)], strict=True):
        late = fractions[(first + end) // 2 : end]
        settled = [float(np.median([row[r] for row in late])) for r in range(len(shares[0]))]
        close = [
            sum(abs(f - s) for f, s in zip(row, settled, strict=True)) <= 0.05
            for row in fractions[first:end]
        ]
        need = min(3, end - first)
        hits = [i for i in range(len(close) - need + 1) if all(close[i : i + need])]
        if not hits:
            return None
        worst = max(worst, hits[0])
    return worst


@given(
    st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=1, max_size=30),
    st.lists(st.integers(0, 35), max_size=4),
)
def test_iterations_until_balanced_matches_a_plain_loop(shares, events):
    rows = [
        {"iteration": i, "rank": r, "batch_size": b, "compute_s": 1.0, "wait_s": 0.0}
        for i, row in enumerate(shares)
        for r, b in enumerate(row)
    ]
    expected = reference_until_balanced(shares, [0, *events])
    assert iterations_until_balanced(pd.DataFrame(rows), [0, *events]) == expected


def summary(policy, scenario, samples_per_s, seed=0):
    return {
        "run": f"{scenario}-{policy}-{seed}",
        "dataset": "d",
        "scenario": scenario,
        "model": "lenet",
        "policy": policy,
        "ranks": 2,
        "seed": seed,
        "global_batch": 8,
        "iterations": 4,
        "wall_s": 1.0,
        "samples_per_s": samples_per_s,
        "mean_wait_fraction": 0.1,
        "max_wait_fraction": 0.2,
        "final_test_accuracy": 0.9,
        "time_to_target_s": None,
        "iterations_until_balanced": None if policy == "static" else 3,
    }


def test_compare_speedups():
    table, speedup = compare(
        [
            summary("oracle", "slow", 200.0),
            summary("static", "slow", 100.0, seed=1),
            summary("static", "slow", 100.0),
            summary("adaptive", "slow", 180.0),
            summary("adaptive", "alone", 50.0),  # no static run to compare with
            summary("adaptive", "slow", 300.0, seed=1),
        ]
    )
    assert list(table["run"]) == [
        "alone-adaptive-0",
        "slow-adaptive-0",
        "slow-oracle-0",
        "slow-static-0",
        "slow-adaptive-1",
        "slow-static-1",
    ]
    assert list(speedup["run"]) == list(table["run"])
    assert np.isnan(speedup["speedup"][0])
    assert list(speedup["speedup"][1:]) == pytest.approx([1.8, 2.0, 1.0, 3.0, 1.0])
    assert table["iterations_until_balanced"].isna().sum() == 2


def test_compare_refuses_two_static_runs_of_one_group():
    with pytest.raises(DynallocError, match="slow-static-0, slow-static-0"):
        compare([summary("static", "slow", 100.0), summary("static", "slow", 90.0)])


def test_cli_writes_tables_and_readable_pngs(tmp_path):
    runs = [
        make_run(
            tmp_path / "runs",
            f"{scenario}-{policy}",
            compute,
            policy=policy,
            labels={"dataset": "d", "scenario": scenario, "run": f"{scenario}-{policy}"},
            changes=changes,
            samples_per_s=sps,
        )
        for scenario, policy, compute, changes, sps in [
            ("slow", "static", [[1, 3]] * 8, (), 100.0),
            ("slow", "adaptive", [[2, 2.1]] * 8, (), 190.0),
            ("burst", "adaptive", [[1, 1]] * 8, [{"rank": 0, "start": 2, "end": 5}], 150.0),
        ]
    ]
    summaries = []
    for run_dir in runs:
        out = tmp_path / "summaries" / f"{run_dir.name}.json"
        assert main(["summarize", "--run-dir", str(run_dir), "--out", str(out)]) == 0
        summaries.append(str(out))
    assert json.loads(Path(summaries[0]).read_text())["max_wait_fraction"] == pytest.approx(2 / 3)

    out_dir = tmp_path / "report"
    argv = ["compare", "--summaries", *summaries, "--runs", *map(str, runs)]
    assert main([*argv, "--tables-dir", str(out_dir), "--plots-dir", str(out_dir)]) == 0
    speedup = pd.read_csv(out_dir / "speedup.csv")
    assert list(speedup["speedup"].round(6).fillna(-1)) == [-1, 1.9, 1.0]
    assert len(pd.read_csv(out_dir / "summary.csv")) == 3

    sizes = {  # (height, width) at 110 dpi: 2x2 panels of 6.5 x 3.8 in, convergence 12 x 4.5 in
        "shares.png": (836, 1430),
        "timing.png": (836, 1430),
        "convergence.png": (495, 1320),
        "throughput.png": (495, 660),
    }
    for name, size in sizes.items():
        data = (out_dir / name).read_bytes()
        assert data.startswith(PNG_MAGIC), name
        assert imread(out_dir / name).shape[:2] == size, name
    assert not [p.name for p in out_dir.iterdir() if p.name.endswith(".tmp")]


def error_line(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_missing_iterations_csv_is_one_line(tmp_path, capsys):
    run_dir = make_run(tmp_path, "run", [[1, 1]])
    (run_dir / "iterations.csv").unlink()
    err = error_line(capsys, ["summarize", "--run-dir", str(run_dir), "--out", "x.json"])
    assert "iterations.csv" in err and err.startswith("dynalloc summarize: error:")


def test_missing_column_is_one_line(tmp_path, capsys):
    run_dir = make_run(tmp_path, "run", [[1, 1]])
    table = pd.read_csv(run_dir / "iterations.csv").drop(columns="wait_s")
    table.to_csv(run_dir / "iterations.csv", index=False)
    err = error_line(capsys, ["summarize", "--run-dir", str(run_dir), "--out", "x.json"])
    assert "iterations.csv" in err and "wait_s" in err


def test_missing_summary_is_one_line(tmp_path, capsys):
    run_dir = make_run(tmp_path, "run", [[1, 1]])
    argv = ["compare", "--summaries", str(tmp_path / "none.json"), "--runs", str(run_dir)]
    out = str(tmp_path / "out")
    err = error_line(capsys, [*argv, "--tables-dir", out, "--plots-dir", out])
    assert "none.json" in err


def test_analysis_imports_neither_mxnet_nor_mpi4py():
    """Every module of the folders the workflow environment imports (core, experiment,
    analysis) and the run-directory contract, walked rather than listed."""
    code = (
        "import importlib, pkgutil, sys, dynalloc, dynalloc.rundir\n"
        "for folder in ('core', 'experiment', 'analysis'):\n"
        "    package = importlib.import_module(f'dynalloc.{folder}')\n"
        "    for module in pkgutil.iter_modules(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(module.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mxnet', 'mpi4py')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr
