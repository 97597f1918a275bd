"""A run directory that a fit cannot use (`dynalloc simulate --fit` today, a warm start from a
run directory too) is refused with one line and exit 2, on copies of a real two-rank run damaged
as users damage them."""

import csv
import shutil
import subprocess

import pytest
import yaml
from helpers import ROOT, dynalloc

pytestmark = pytest.mark.mpi

SIMULATE = ROOT / ".venv-workflow" / "bin" / "dynalloc"


@pytest.fixture(scope="module")
def real_run(digits, tmp_path_factory):
    folder = tmp_path_factory.mktemp("real")
    config = folder / "run.yaml"
    config.write_text(yaml.safe_dump({
        "dataset": str(digits), "model": "mlp", "global_batch": 128, "iterations": 16,
        "policy": {"name": "adaptive"}, "scenario": {"slowdown": [1, 2]},
    }))  # fmt: skip
    result = dynalloc("train", "--config", config, "--out", folder / "run", ranks=2)
    assert result.returncode == 0, result.stderr
    return folder / "run"


def damaged(real_run, tmp_path, config=None, rows=None):
    """A copy of the run with config.yaml's keys updated by `config` and iterations.csv's rows
    passed through `rows(header, rows) -> (header, rows)`."""
    copy = tmp_path / "copy"
    shutil.copytree(real_run, copy)
    if config is not None:
        path = copy / "config.yaml"
        path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), **config}))
    if rows is not None:
        path = copy / "iterations.csv"
        with open(path, newline="") as handle:
            table = list(csv.reader(handle))
        header, body = rows(table[0], table[1:])
        with open(path, "w", newline="") as handle:
            csv.writer(handle).writerows([header, *body])
    return copy


def without(column):
    def drop(header, body):
        i = header.index(column)
        return header[:i] + header[i + 1 :], [row[:i] + row[i + 1 :] for row in body]

    return drop


def set_slowdown(value):
    def change(header, body):
        body[5][header.index("slowdown")] = value
        return header, body

    return change


def drop_rank_rows(header, body):
    rank = header.index("rank")
    iteration = header.index("iteration")
    return header, [row for row in body if not (row[rank] == "1" and row[iteration] == "7")]


CASES = {
    "three factors for two ranks": (
        {"scenario": {"slowdown": [1, 2, 2], "changes": []}},
        None,
        "scenario.slowdown has 3 factors for the 2 ranks of iterations.csv",
    ),
    "a rank's rows missing": (
        None,
        drop_rank_rows,
        "iterations.csv: iteration 7 has rows of rank(s) [0] but not of [1]",
    ),
    "max_share of one rank": ({"max_share": [256]}, None, "max_share has 1 entries for the 2"),
    "ranks 3": ({"ranks": 3}, None, "ranks is 3, but iterations.csv has 2 ranks' rows"),
    "no sync_s": (None, without("sync_s"), "iterations.csv lacks column(s): sync_s"),
    "no slowdown": (None, without("slowdown"), "iterations.csv lacks column(s): slowdown"),
    "no iteration_s": (None, without("iteration_s"), "lacks column(s): iteration_s"),
    "zero slowdown": (None, set_slowdown("0"), "column slowdown must be > 0"),
    "a time that is no number": (None, set_slowdown("fast"), "column slowdown must hold numbers"),
}


@pytest.mark.skipif(not SIMULATE.exists(), reason="make setup builds .venv-workflow")
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_run_directory_a_fit_cannot_use_is_one_line_and_exit_2(real_run, tmp_path, case):
    config, rows, message = CASES[case]
    copy = damaged(real_run, tmp_path, config, rows)
    result = run_simulate("--fit", copy)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr, result.stderr
    assert result.stderr.startswith("dynalloc simulate: error: ")


@pytest.mark.skipif(not SIMULATE.exists(), reason="make setup builds .venv-workflow")
def test_the_undamaged_copy_fits(real_run, tmp_path):
    result = run_simulate("--fit", damaged(real_run, tmp_path), "--policies", "adaptive")
    assert result.returncode == 0, result.stderr
    assert "adaptive" in result.stdout


def run_simulate(*args):
    return subprocess.run(
        [str(SIMULATE), "simulate", *map(str, args)], capture_output=True, text=True, timeout=120
    )
