"""Elastic runs on real MPI ranks under the job supervisor: a rank SIGKILLed mid-run ends one
launch, not the run; it goes on at once from the last checkpoint on the ranks that remain, its
shares balanced from their costs, and ends with the parameters of the run that never lost a
rank, every iteration logged once. Too few survivors, or restarts spent, end it as before."""

import os
import signal
import subprocess
import time

import numpy as np
import pytest
import yaml
from dynalloc.core.shares import minmax_shares
from dynalloc.runtime.common import checkpoint
from helpers import BIN, ENV, dynalloc, rank_pids, read_rows, wait_for
from test_resume import ITERATIONS, train, worst_difference, write_config

pytestmark = pytest.mark.mpi

KILLED_AFTER = 20  # the newest checkpoint's iteration when the rank is killed


def supervised(config, out, ranks, tmp_path):
    """`dynalloc train` on `ranks` ranks under `dynalloc supervise`, as docs/reliability.md
    runs it: (process, its output's file)."""
    log = tmp_path / "job.log"
    command = [BIN / "dynalloc", "supervise", "--", BIN / "mpiexec", "-n", ranks]
    command += [BIN / "dynalloc", "train", "--config", config, "--out", out]
    with open(log, "w") as output:
        job = subprocess.Popen(
            list(map(str, command)), stdout=output, stderr=subprocess.STDOUT, env=ENV,
            start_new_session=True,
        )  # fmt: skip
    return job, log


def supervised_beside_a_whole_run(digits, tmp_path, elastic):
    """3 ranks (1:2:8) with this `elastic` section: the run that loses none in `whole`, then
    the run under the supervisor (`run`), started."""
    config = write_config(
        tmp_path, "run", dataset=str(digits), scenario={"slowdown": [1, 2, 8]}, elastic=elastic
    )
    whole = train(config, tmp_path / "whole", 3)
    assert whole.returncode == 0, whole.stderr
    return supervised(config, tmp_path / "run", 3, tmp_path)


def kill_rank_after_checkpoint(job, out, victim):
    """SIGKILL rank `victim` once a checkpoint of KILLED_AFTER iterations exists; the time."""

    def checkpointed():
        return job.poll() is not None or (
            any(int(p.stem.split("-")[1]) >= KILLED_AFTER for p in checkpoint.existing(out))
            and rank_pids(out)
        )

    wait_for(checkpointed, what="a checkpoint")
    assert job.poll() is None, "the run ended before a rank could be killed"
    os.kill(rank_pids(out)[victim], signal.SIGKILL)
    return time.monotonic()


def training_again(out, ranks, since, timeout=120):
    """Seconds from `since` until iterations.csv.partial holds a row of a launch of `ranks`."""
    path = out / "iterations.csv.partial"

    def trained():
        return path.exists() and any(r["ranks"] == str(ranks) for r in read_rows(path))

    wait_for(trained, timeout=timeout, what=f"an iteration on {ranks} ranks")
    return time.monotonic() - since


def test_a_killed_rank_ends_a_launch_and_the_run_finishes_on_the_survivors(digits, tmp_path):
    out = tmp_path / "run"
    job, log = supervised_beside_a_whole_run(digits, tmp_path, {"min_ranks": 2, "max_restarts": 2})
    killed = kill_rank_after_checkpoint(job, out, victim=2)
    lost_s = training_again(out, 2, since=killed)
    assert job.wait(timeout=300) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "restart 1 of 2: ranks [2] of the last launch lost; going on with 2 ranks" in text
    assert "resuming from" in text
    print(f"fault -> an iteration on the survivors: {lost_s:.1f} s")
    assert lost_s < 60

    rows = read_rows(out / "iterations.csv")
    keys = [(int(r["iteration"]), int(r["rank"])) for r in rows]
    assert len(keys) == len(set(keys)), "an iteration was logged twice"
    ranks = {}
    for r in rows:
        ranks.setdefault(int(r["iteration"]), set()).add(int(r["ranks"]))
    assert sorted(ranks) == list(range(ITERATIONS))
    change = min(i for i, n in ranks.items() if n == {2})
    assert change >= KILLED_AFTER and all(
        ranks[i] == ({3} if i < change else {2}) for i in ranks
    ), ranks
    first = [int(r["batch_size"]) for r in rows if int(r["iteration"]) == change]
    warm = yaml.safe_load((tmp_path / "run.elastic-1.yaml").read_text())["policy"]["warm_start"]
    a, c = (np.array(warm[key]) * [1, 2] for key in ("intercept_s", "per_sample_s"))
    assert first == minmax_shares(a, c, 64).tolist(), "the survivors did not start balanced"
    survivors = yaml.safe_load((out / "config.yaml").read_text())
    assert survivors["scenario"]["slowdown"] == [1, 2] and survivors["ranks"] == 2
    worst = worst_difference(tmp_path / "whole", out)
    print(f"max |difference| to the run that lost no rank: {worst:.2e}")
    assert worst <= 1e-4


def test_with_max_ranks_a_new_rank_takes_the_killed_ranks_slot(digits, tmp_path):
    out = tmp_path / "run"
    job, log = supervised_beside_a_whole_run(digits, tmp_path, {"max_ranks": 3, "max_restarts": 1})
    kill_rank_after_checkpoint(job, out, victim=1)
    assert job.wait(timeout=300) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "ranks [1] of the last launch lost; going on with 3 ranks, 1 of them new" in text
    rows = read_rows(out / "iterations.csv")
    keys = sorted((int(r["iteration"]), int(r["rank"])) for r in rows)
    assert keys == [(i, r) for i in range(ITERATIONS) for r in range(3)]
    joined = yaml.safe_load((out / "config.yaml").read_text())
    assert joined["scenario"]["slowdown"] == [1, 8, 1]  # the new rank is not rank 1's slowdown
    assert worst_difference(tmp_path / "whole", out) <= 1e-4


def test_fewer_survivors_than_min_ranks_end_the_run_with_the_launchs_failure(digits, tmp_path):
    config = write_config(
        tmp_path, "run", dataset=str(digits), elastic={"min_ranks": 2, "max_restarts": 1}
    )
    out = tmp_path / "run"
    job, log = supervised(config, out, 2, tmp_path)
    kill_rank_after_checkpoint(job, out, victim=1)
    code = job.wait(timeout=60)
    text = log.read_text()
    assert code != 0 and not (out / "metrics.json").exists(), text
    assert "1 ranks remain, fewer than elastic.min_ranks 2" in text
    assert "resuming from" not in text


@pytest.mark.parametrize(
    ("elastic", "message"),
    [
        ({"min_ranks": 3}, "config key 'elastic.min_ranks' is 3, but the run has 2 ranks"),
        ({"max_restarts": -1}, "config key 'elastic.max_restarts' must be 0 or more, got -1"),
    ],
)
def test_bad_elastic_section_is_refused_at_start_in_one_line(digits, tmp_path, elastic, message):
    config = write_config(tmp_path, "run", dataset=str(digits), elastic=elastic)
    result = dynalloc("train", "--config", config, "--out", tmp_path / "run", ranks=2)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()
