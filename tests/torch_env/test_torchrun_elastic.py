"""`framework: torch` runs under torchrun's elastic agent (`--nnodes=MIN:MAX`), started as
`dynalloc torchrun`: a node lost mid-run (its agent and worker SIGKILLed) -> the other node's
agent forms the group again, and the run resumes from its checkpoint on the rest and finishes,
the SGD unchanged; a refused input ends the launch with exit 2, as under mpiexec."""

import contextlib
import os
import signal
import socket
import subprocess
import time

import numpy as np
import pytest
import yaml
from dynalloc.runtime.common import checkpoint
from launchers import BIN, ENV, dynalloc_train, stage_digits
from test_torch_train import parameters

ITERATIONS = 120


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return stage_digits(tmp_path_factory.mktemp("data") / "digits")


def write(folder, digits, **keys):
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump({
        "dataset": str(digits), "framework": "torch", "model": "mlp", "global_batch": 64,
        "iterations": ITERATIONS, "policy": {"name": "adaptive"},
        "scenario": {"slowdown": [1, 4]}, "checkpoint": {"every": 5, "keep": 2},
        "elastic": {"min_ranks": 1}, "seed": 2, **keys,
    }))  # fmt: skip
    return path


def free_port():
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def node(config, out, port, log, store):
    """One node's agent of a 1-to-2-node elastic job, one worker each; quick to notice a node
    gone (torchrun's own rendezvous settings). The c10d rendezvous store lives in one agent
    (`store`; else the first to bind the port) and ends with it."""
    conf = "last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=3"
    command = [BIN / "dynalloc", "torchrun", "--nnodes=1:2", "--nproc-per-node=1",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=localhost:{port}", "--rdzv-id=elastic",
               "--max-restarts=2", f"--rdzv-conf={conf},is_host={str(store).lower()}",
               BIN / "dynalloc", "train", "--config", config, "--out", out]  # fmt: skip
    return subprocess.Popen(
        [str(c) for c in command], stdout=log, stderr=subprocess.STDOUT, env=ENV,
        start_new_session=True,
    )  # fmt: skip


def on_one_rank(out):
    """Whether the run's rows include one of a group of one rank."""
    for name in ("iterations.csv.partial", "iterations.csv"):
        with contextlib.suppress(OSError):
            if any(line.endswith(",1") for line in (out / name).read_text().splitlines()):
                return True
    return False


def test_a_lost_node_ends_a_round_and_the_run_finishes_on_the_rest(digits, tmp_path):
    config = write(tmp_path, digits)
    whole = dynalloc_train(2, config, tmp_path / "whole", "mpiexec")
    assert whole.returncode == 0, whole.stderr
    out, port = tmp_path / "run", free_port()
    with open(tmp_path / "a.log", "w") as a_log, open(tmp_path / "b.log", "w") as b_log:
        first = node(config, out, port, a_log, store=True)  # it stays
        second = node(config, out, port, b_log, store=False)
        deadline = time.monotonic() + 120
        while not any(int(p.stem.split("-")[1]) >= 20 for p in checkpoint.existing(out)):
            assert time.monotonic() < deadline and first.poll() is None, "no checkpoint"
            time.sleep(0.01)
        workers = subprocess.run(["pgrep", "-P", str(second.pid)], capture_output=True,
                                 text=True).stdout.split()  # fmt: skip
        assert workers, "the second node's worker was not found"
        for pid in [second.pid, *map(int, workers)]:  # the node: its agent, and its worker (a
            os.kill(pid, signal.SIGKILL)  # session of its own, as torchrun starts it)
        killed = time.monotonic()
        while not on_one_rank(out) and first.poll() is None and time.monotonic() < killed + 120:
            time.sleep(0.05)
        again_s = time.monotonic() - killed
        assert first.wait(timeout=240) == 0, (tmp_path / "a.log").read_text()[-3000:]
    rows = [line.split(",") for line in (out / "iterations.csv").read_text().splitlines()]
    header, rows = rows[0], rows[1:]
    iteration, ranks = header.index("iteration"), header.index("ranks")
    per_iteration = {}
    for row in rows:
        per_iteration.setdefault(int(row[iteration]), []).append(int(row[ranks]))
    assert sorted(per_iteration) == list(range(ITERATIONS))
    assert {len(v) for v in per_iteration.values()} == {1, 2}
    assert all(len(v) == v[0] for v in per_iteration.values()), "rows and ranks disagree"
    log = (out / "train.log").read_text()
    assert "resuming from" in log
    print(f"node killed -> an iteration on the rest: {again_s:.1f} s")
    assert again_s < 60
    worst = float(np.abs(parameters(out) - parameters(tmp_path / "whole")).max())
    print(f"max |difference| to the run that lost no node: {worst:.2e}")
    assert worst <= 1e-4


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"elastic": {"min_ranks": 3}}, "config key 'elastic.min_ranks' is 3, but the run has 2"),
        ({"elastic": {"max_restarts": -1}}, "config key 'elastic.max_restarts' must be 0 or more"),
    ],
)
def test_bad_input_under_torchrun_is_one_line_and_exit_2(digits, tmp_path, keys, message):
    command = [BIN / "dynalloc", "torchrun", "--standalone", "--nproc-per-node=2",
               BIN / "dynalloc", "train", "--config", write(tmp_path, digits, **keys),
               "--out", tmp_path / "run"]  # fmt: skip
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=ENV)
    assert result.returncode == 2
    assert result.stderr.startswith("dynalloc torchrun: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "run").exists()


def test_a_worker_that_refuses_its_input_ends_torchrun_with_exit_2(digits, tmp_path):
    """Found only where the model is built, on the workers: torchrun alone would exit 1."""
    config = write(tmp_path, digits, model={"factory": "no_such_module:build"})
    command = [BIN / "dynalloc", "torchrun", "--standalone", "--nproc-per-node=2",
               BIN / "dynalloc", "train", "--config", config,
               "--out", tmp_path / "run"]  # fmt: skip
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=ENV)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("dynalloc train:")]
    assert lines and "module 'no_such_module' does not import" in lines[0]
