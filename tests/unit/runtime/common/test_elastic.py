"""`runtime.common.elastic` on launch outputs and checkpoints: which ranks a launch lost, the
command that goes on without them, and the costs the survivors start from."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from dynalloc.core.policies import make_policy
from dynalloc.core.state import export
from dynalloc.rundir import Row
from dynalloc.runtime.common import checkpoint
from dynalloc.runtime.common.elastic import Elastic, learnt_costs, lost_ranks

STALL = (
    "dynalloc train: error: rank 0: no progress for 12.0 s after 40 iterations (stall bound "
    "10.0 s): ranks 2 (pid 311 on node3), 3 (pid 312 on node3) stopped answering; ending the "
    "job (exit 69); rerun to resume from the last checkpoint"
)


def test_lost_ranks_are_read_from_the_peer_watch_the_stall_watch_and_srun():
    watch = "dynalloc train: error: rank 1 (pid 4038) was lost (killed or crashed); stopping"
    assert lost_ranks(watch + "\n" + watch) == ({1}, set())
    assert lost_ranks(STALL) == ({2, 3}, {"node3"})
    srun = "srun: error: node2: tasks 4-5,7: Killed\nsrun: error: node1: task 0: Exited"
    assert lost_ranks(srun) == ({0, 4, 5, 7}, set())
    assert lost_ranks("dynalloc train: error: the loss became nan") == (set(), set())


def launch(tmp_path, ranks=4, elastic=None, launcher=("mpiexec",)):
    raw = {"dataset": "d", "policy": "adaptive", "scenario": {"slowdown": [1, 2, 3, 4][:ranks]},
           "elastic": elastic or {"min_ranks": 2, "max_restarts": 2}}  # fmt: skip
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    command = [*launcher, "-n", str(ranks), "dynalloc", "train", "--config", str(config),
               "--out", str(tmp_path / "run")]  # fmt: skip
    return command, Elastic.of(command)


def test_a_run_without_restarts_is_not_elastic(tmp_path):
    assert launch(tmp_path, elastic={"max_restarts": 0})[1] is None
    assert Elastic.of(["dynalloc", "baseline", "--workers", "2"]) is None


def test_a_restart_goes_on_with_the_survivors_and_excludes_cut_off_hosts(tmp_path):
    command, elastic = launch(tmp_path, launcher=("srun", "--mpi=pmi2"))
    again, why = elastic.restart(command, STALL)
    assert why == (
        "restart 1 of 2: ranks [2, 3] of the last launch lost; going on with 2 ranks, without node3"
    )
    assert again[:4] == ["srun", "--exclude=node3", "--mpi=pmi2", "-n"] and again[4] == "2"
    config = yaml.safe_load(Path(again[again.index("--config") + 1]).read_text())
    assert config["scenario"]["slowdown"] == [1, 2]
    lost = "dynalloc train: error: rank 0 (pid 9) was lost (killed or crashed)"
    third, why = elastic.restart(again, lost)
    assert third is None and why == "1 ranks remain, fewer than elastic.min_ranks 2"


def test_restarts_are_bounded_and_only_a_loss_is_cured(tmp_path):
    command, elastic = launch(tmp_path, elastic={"max_restarts": 1})
    assert elastic.restart(command, "dynalloc train: error: the loss became nan") == (
        None, "no rank was lost: not a failure a restart cures")  # fmt: skip
    lost = "dynalloc train: error: rank 3 (pid 9) was lost (killed or crashed)"
    again, _ = elastic.restart(command, lost)
    assert again[again.index("-n") + 1] == "3"
    assert elastic.restart(again, lost.replace("rank 3", "rank 1")) == (
        None, "no restart left (elastic.max_restarts 1)")  # fmt: skip


def rows_of(policy, shares, seconds, slowdown, iterations=30):
    rows = []
    for i in range(iterations):
        for r, share in enumerate(shares):
            rows.append(list(Row(i, 0, r, int(share), seconds[r], 0, 0, 0, 0, slowdown[r], "a")))
        policy.update(np.array(shares), np.array(seconds), i + 1, False)
        shares = policy.shares
        seconds = [0.01 + 0.002 * s * f for s, f in zip(shares, slowdown, strict=True)]
    return rows


def test_survivors_start_from_the_costs_adaptive_learnt_with_their_slowdown_divided_out():
    policy = make_policy("adaptive", 3, 96)
    slowdown = [1.0, 2.0, 4.0]
    rows = rows_of(policy, [32, 32, 32], [0.07, 0.13, 0.27], slowdown)
    a, c, noise = learnt_costs(export(policy), rows)
    # Rank r took 0.01 + 0.002 f_r b: its own cost (f_r divided out) is 0.01 / f_r + 0.002 b.
    assert c == pytest.approx([0.002] * 3, rel=0.15)
    assert a == pytest.approx([0.01 / f for f in slowdown], rel=0.3)
    assert np.isfinite(noise)
    assert learnt_costs(export(make_policy("static", 3, 96)), rows) is None
    assert learnt_costs(export(make_policy("adaptive", 3, 96)), rows) is None  # nothing seen


def test_the_survivors_config_carries_their_learnt_costs(tmp_path):
    command, elastic = launch(tmp_path, ranks=3)
    policy = make_policy("adaptive", 3, 96)
    slowdown = [1.0, 2.0, 3.0]
    rows = rows_of(policy, [32, 32, 32], [0.07, 0.13, 0.2], slowdown)
    payload = {"config": {"ranks": 3}, "iteration": 30, "policy": export(policy),
               "books": {"rows": rows}, "complete": False}  # fmt: skip
    checkpoint.write(tmp_path / "run", 30, payload, keep=1)
    lost = "dynalloc train: error: rank 1 (pid 9) was lost (killed or crashed)"
    again, _ = elastic.restart(command, lost)
    config = yaml.safe_load(Path(again[again.index("--config") + 1]).read_text())
    warm = config["policy"]["warm_start"]
    a, c, _ = learnt_costs(export(policy), rows)
    assert warm["per_sample_s"] == pytest.approx([c[0], c[2]])
    assert warm["intercept_s"] == pytest.approx([a[0], a[2]])
